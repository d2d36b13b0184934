#!/usr/bin/env bash
# Side by side with llama.cpp (issue 12): the same peer-shape GGUF files through `llamay bench` and the peer's
# `llama-bench`, interleaved, and one markdown table of pp512 / tg128 and their ratios per round.
#
# Usage: bench/side_by_side.sh [DIR]        (run from the repository root)
#   DIR       where the model files are written (default: a new temporary directory, removed at the end);
#             files already there are reused (synthetic weights are deterministic).
# Environment:
#   LLAMAY_ISA        passed through to llamay (avx512 | avx2 | scalar): run once per level.
#   SBS_TYPES         weight types (default "f16 q8_0 q4_0 q4_K_M"): llamay's synth types, or the peer's
#                     mixes q4_K_M and mxfp4_moe (quantised by the peer from the F16 file).
#   SBS_SHAPE         the synthetic model's shape, `llamay model synth --shape` (default peer; qwen3moe,
#                     qwen2moe, hybrid-moe for the mixtures of experts), and SBS_SYNTH_ARGS more synth options
#                     (for example "--layers 4").
#   SBS_ROUNDS        rounds (default 2; odd rounds run llamay first, even rounds the peer first).
#   SBS_REPS          repetitions per run (default 3), SBS_THREADS (default 2), SBS_PP (512), SBS_TG (128).
#   SBS_DEPTH         context tokens held before each test (both engines' -d; default 0): the 4k-context
#                     decode target runs SBS_PP=0 at SBS_DEPTH=128 and at 4096.
#   SBS_PAIR=1        instead: two processes of each engine at once (each with SBS_THREADS threads, so
#                     together they ask for twice the cores), against one alone: a pool that spins while it
#                     waits takes cores the other process needs (issue 12). Prompt and generation rates.
#   SBS_MAX_LOAD      refuse to start when the 1-minute load average is above this (default 0.7).
#   SBS_FORCE=1       run anyway on a busy machine (the table is then marked as measured under load).
# While it runs /tmp/BENCH_RUNNING exists (other developers wait for it); it is removed on exit.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
llamay=${LLAMAY_BIN:-$root/build/release/bin/llamay}
peers=${PEERS_DIR:-$root/../shared/peers}
types=${SBS_TYPES:-f16 q8_0 q4_0 q4_K_M}
shape=${SBS_SHAPE:-peer}
read -r -a synth_args <<<"${SBS_SYNTH_ARGS:-}"
rounds=${SBS_ROUNDS:-2}
reps=${SBS_REPS:-3}
threads=${SBS_THREADS:-2}
pp=${SBS_PP:-512}
tg=${SBS_TG:-128}
depth=${SBS_DEPTH:-0}
at=""
[ "$depth" -gt 0 ] && at=" @ d$depth"
max_load=${SBS_MAX_LOAD:-0.7}
marker=/tmp/BENCH_RUNNING

die() { echo "side_by_side: $*" >&2; exit 1; }
[ -x "$llamay" ] || die "no llamay binary at $llamay (build it: cmake --build build/release --target llamay)"
[ -x "$peers/llama-bench" ] || die "no peer at $peers/llama-bench"

# A busy machine makes every number here meaningless: refuse (or, forced, say so loudly).
load1=$(cut -d' ' -f1 /proc/loadavg)
compiling=$(pgrep -c -x cc1plus || true)
busy=""
if awk -v l="$load1" -v m="$max_load" 'BEGIN { exit !(l > m) }'; then busy="load average $load1 > $max_load"; fi
if [ "${compiling:-0}" -gt 0 ]; then busy="${busy:+$busy; }$compiling compiler process(es) running"; fi
if [ -e "$marker" ]; then busy="${busy:+$busy; }$marker exists (someone else is measuring)"; fi
if [ -n "$busy" ]; then
  if [ "${SBS_FORCE:-0}" != 1 ]; then die "machine busy ($busy); wait, or set SBS_FORCE=1 to measure anyway"; fi
  echo "!!!!!!!! WARNING: measuring on a busy machine ($busy): the numbers below are not comparable !!!!!!!!" >&2
fi

dir=${1:-}
tmp_dir=""
if [ -z "$dir" ]; then
  tmp_dir=$(mktemp -d /tmp/side_by_side.XXXXXX)
  dir=$tmp_dir
fi
mkdir -p "$dir"
cleanup() {
  rm -f "$marker"
  if [ -n "$tmp_dir" ]; then rm -rf "$tmp_dir"; fi
}
# On INT/TERM also stop the benchmark that is running (our own descendants, by process id).
kill_descendants() {
  local c
  for c in $(pgrep -P "$1" || true); do
    kill_descendants "$c"
    kill "$c" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'kill_descendants $$; exit 130' INT TERM
echo "side_by_side pid $$ since $(date -u +%FT%TZ)" >"$marker"

# The model files: llamay's synthetic shape, and the peer's own mixes (Q4_K_M; MXFP4_MOE, gpt-oss's: MXFP4
# experts, Q8_0 for the rest) made by the peer's quantizer from the F16 file.
model_file() { echo "$dir/$shape${SBS_SYNTH_ARGS:+-${SBS_SYNTH_ARGS// /}}-$1.gguf"; }
for t in $types; do
  f=$(model_file "$t")
  [ -s "$f" ] && continue
  case "$t" in
    q4_K_M | mxfp4_moe)
      f16=$(model_file f16)
      [ -s "$f16" ] || "$llamay" model synth --shape "$shape" "${synth_args[@]}" --type f16 -o "$f16" >&2
      "$peers/llama-quantize" "$f16" "$f" "$(echo "$t" | tr '[:lower:]' '[:upper:]')" "$threads" >/dev/null 2>&1 ||
        die "llama-quantize failed"
      ;;
    *) "$llamay" model synth --shape "$shape" "${synth_args[@]}" --type "$t" -o "$f" >&2 ;;
  esac
done

# Some VMs list AMX but fault on it: the peer's AVX-512 build then dies with SIGILL (exit 132) on every
# quantised file (llama.cpp repacks those weights for AMX). Probe each file once with the peer's default
# build; on 132, measure with its AVX2 build and say so in the table's header.
peer_note=""
if [ -z "${LLAMA_PEER_VARIANT:-}" ]; then
  for t in $types; do
    set +e
    "$peers/llama-bench" -m "$(model_file "$t")" -p 8 -n 0 -r 1 -t "$threads" >/dev/null 2>&1
    rc=$?
    set -e
    if [ "$rc" -eq 132 ]; then
      export LLAMA_PEER_VARIANT=avx2
      peer_note="; its default (AVX-512) build died with SIGILL (exit 132) on $t, so its AVX2 build is measured"
      echo "side_by_side: the peer's AVX-512 build faults here (exit 132); using LLAMA_PEER_VARIANT=avx2" >&2
      break
    fi
  done
fi

# "pp tg" tokens/s (medians) from llamay's table, columns found by their headers.
run_llamay() {
  "$llamay" bench -m "$1" -p "$pp" -n "$tg" -d "$depth" -r "$reps" -t "$threads" 2>/dev/null |
    awk -F'|' -v pp="pp$pp$at" -v tg="tg$tg$at" '
    function trim(s) { gsub(/^ +| +$/, "", s); return s }
    /\| *test *\|/ { for (i = 1; i <= NF; ++i) { h = trim($i); if (h == "test") ct = i; if (h == "t/s") cv = i } next }
    ct && cv { t = trim($ct); split(trim($cv), v, " "); if (t == pp) p = v[1]; if (t == tg) g = v[1] }
    END { printf "%s %s\n", (p == "" ? "-" : p), (g == "" ? "-" : g) }'
}
# The same from llama-bench's CSV (avg_ts of the n_prompt row and of the n_gen row).
run_peer() {
  "$peers/llama-bench" -m "$1" -p "$pp" -n "$tg" -d "$depth" -r "$reps" -t "$threads" -o csv 2>/dev/null | awk -F',' '
    function unq(s) { gsub(/"/, "", s); return s }
    NR == 1 { for (i = 1; i <= NF; ++i) { c[unq($i)] = i } next }
    { np = unq($c["n_prompt"]); ng = unq($c["n_gen"]); ts = unq($c["avg_ts"])
      if (np + 0 > 0 && ng + 0 == 0) p = sprintf("%.1f", ts); if (ng + 0 > 0 && np + 0 == 0) g = sprintf("%.1f", ts) }
    END { printf "%s %s\n", (p == "" ? "-" : p), (g == "" ? "-" : g) }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }

# "pp tg" of two runs of `$1` (run_llamay or run_peer) on file `$2` at once, as "ppA tgA ppB tgB".
run_pair() {
  local a b
  a=$(mktemp) b=$(mktemp)
  "$1" "$2" >"$a" &
  "$1" "$2" >"$b" &
  wait
  echo "$(cat "$a") $(cat "$b")"
  rm -f "$a" "$b"
}
sum() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-") print "-"; else printf "%.1f", a + b }'; }

if [ "${SBS_PAIR:-0}" = 1 ]; then
  echo "# two processes at once, $(date -u +%FT%TZ), llamay LLAMAY_ISA=${LLAMAY_ISA:-default}; -p $pp -n $tg -r $reps -t $threads each; load at start $load1"
  echo
  echo "| weights | engine | alone pp$pp | two at once: each pp$pp | together / alone | alone tg$tg | two at once: each tg$tg | together / alone |"
  echo "|---|---|---|---|---|---|---|---|"
  for t in $types; do
    f=$(model_file "$t")
    for engine in llamay peer; do
      read -r p1 g1 < <("run_$engine" "$f")
      read -r pa ga pb gb < <(run_pair "run_$engine" "$f")
      name=$([ "$engine" = peer ] && echo llama.cpp || echo llamay)
      echo "| $t | $name | $p1 | $pa, $pb | $(ratio "$(sum "$pa" "$pb")" "$p1") | $g1 | $ga, $gb | $(ratio "$(sum "$ga" "$gb")" "$g1") |"
    done
  done
  echo
  echo "# load at end $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi

isa=${LLAMAY_ISA:-default}
echo "# side by side, $(date -u +%FT%TZ), llamay LLAMAY_ISA=$isa, peer $peers/llama-bench (${LLAMA_PEER_VARIANT:-its default variant}$peer_note)"
[ -z "$busy" ] || echo "# MEASURED ON A BUSY MACHINE ($busy): not comparable"
echo "# shape $shape ${SBS_SYNTH_ARGS:-}; -p $pp -n $tg -d $depth -r $reps -t $threads; load at start $load1; model files in $dir"
echo
echo "| weights | round | llamay pp$pp | llama.cpp pp$pp | ratio | llamay tg$tg | llama.cpp tg$tg | ratio |"
echo "|---|---|---|---|---|---|---|---|"
for ((round = 1; round <= rounds; ++round)); do
  for t in $types; do
    f=$(model_file "$t")
    if ((round % 2)); then
      read -r lp lg < <(run_llamay "$f")
      read -r pp_peer pg < <(run_peer "$f")
    else
      read -r pp_peer pg < <(run_peer "$f")
      read -r lp lg < <(run_llamay "$f")
    fi
    echo "| $t | $round | $lp | $pp_peer | $(ratio "$lp" "$pp_peer") | $lg | $pg | $(ratio "$lg" "$pg") |"
  done
done
echo
echo "# load at end $(cut -d' ' -f1-3 /proc/loadavg)"
