#!/usr/bin/env bash
# kill -9 of the server during a push to a directory store (issue 23, faults). `base` is pushed once and
# answered (200). Then, three times, a new context of about 3,700 tokens (15 chunks of 512 KiB, each
# written to a temporary, fsynced and renamed; the manifest last) is pushed over `base`, and the server is
# killed by tests/e2e/lib/kill_when.py the moment the store shows: round 1, its first new chunk; round 2,
# its eighth; round 3, the new manifest (its temporary or itself). After each kill, on a new server:
#   - `base` restores whole: the previous version (its tokens) or, only if the manifest was renamed, the
#     new one; a push the client saw answered is never lost;
#   - the store's invariants: `ctx ls` lists base and nothing from a temporary, `ctx pull` verifies every
#     chunk of every listed snapshot, leftover temporaries are not valid object names;
# and finally a chunk and a manifest truncated by hand (as a torn write would leave them) are refused with
# a clear error, 502 store_object_damaged and `ctx pull` fails, never restored as something else.
# Prints the phase each kill hit. Run by run.sh (ctest -L faults); the servers are started here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
trap stop_all_servers EXIT
T=$LLAMAY_E2E_TMP
STORE=$T/store
post() { curl -sS --max-time "$E2E_MAX_TIME" -H 'Content-Type: application/json' "$@"; }
body() { python3 -c "import json; print(json.dumps({'prompt': '$1 ' * $2}))"; }

start_server first --store "$STORE"
post "$SERVER_URL/v1/contexts" -d "$(body 'the first pushed context' 40)" >"$T/made.json"
id=$(jq -r .id "$T/made.json") want=$(jq -r .tokens "$T/made.json")
r=$(post "$SERVER_URL/v1/contexts/$id/push" -d '{"name": "base"}')
[ "$(jq -r .name <<<"$r")" = base ] && pass "base pushed ($want tokens)" || { echo "FAIL push: $r"; exit 1; }
stop_server "$SERVER_PID" || fail "the first server exited $?"

triggers=("chunks/ 1" "chunks/ 8" "snapshots/\\.?base 1")
for round in 1 2 3; do
  start_server "killed$round" --store "$STORE"
  A=$SERVER_URL A_PID=$SERVER_PID
  made=$(post "$A/v1/contexts" -d "$(body "round $round: a context large enough to take a while to push" 45)")
  nid=$(jq -r .id <<<"$made") new=$(jq -r .tokens <<<"$made")
  [ "$nid" != null ] || { echo "FAIL round $round: create: $made"; exit 1; }
  chunks_before=$(find "$STORE" -path '*/chunks/*' -type f | grep -vc '~tmp' || true)
  read -r pattern count <<<"${triggers[$((round - 1))]}"
  python3 "$here/lib/kill_when.py" "$A_PID" "$STORE" "$pattern" "$count" 20 >"$T/kill.out" &
  killer=$!
  until grep -qs watching "$T/kill.out"; do sleep 0.01; done
  code=$(curl -sS -o "$T/push.out" -w '%{http_code}' --max-time "$E2E_MAX_TIME" -H 'Content-Type: application/json' \
    "$A/v1/contexts/$nid/push" -d '{"name": "base"}' 2>/dev/null) || true
  wait "$killer" || true
  kill -KILL "$A_PID" 2>/dev/null || true  # when the trigger never came (the push ended first): killed after it
  wait "$A_PID" 2>/dev/null || true
  chunks_after=$(find "$STORE" -path '*/chunks/*' -type f | grep -vc '~tmp' || true)
  temps=$(find "$STORE" -name '*~tmp*' | wc -l)
  echo "phase: round $round ($pattern x$count): $(grep -v watching "$T/kill.out"); push answered $code; $((chunks_after - chunks_before)) of 15 new chunks stored; $temps temporaries left"
  answered=0
  [ "$code" = 200 ] && jq -e '.name == "base"' "$T/push.out" >/dev/null 2>&1 && answered=1

  start_server "after$round" --store "$STORE"
  B=$SERVER_URL
  r=$(post "$B/v1/contexts/restore" -d '{"name": "base"}')
  got=$(jq -r .tokens <<<"$r")
  if [ "$got" = "$new" ]; then
    pass "round $round: base restores whole, the new version ($new tokens): the manifest was renamed"
    want=$new
  elif [ "$got" = "$want" ] && [ "$answered" = 0 ]; then
    pass "round $round: base restores whole, the previous version ($want tokens)"
  else
    fail "round $round: base restored as $r (previous $want tokens, new $new, push answered $code)"
  fi
  c=$(post "$B/v1/completions" -d "{\"prompt\": \" go\", \"max_tokens\": 2, \"llamay_session\": \"$(jq -r .id <<<"$r")\"}" |
    jq -r '.choices[0].finish_reason')
  [ "$c" = length ] || [ "$c" = stop ] || fail "round $round: the restored base does not continue ($c)"
  ls=$("$LLAMAY_BIN" ctx ls --store "$STORE" 2>&1) || fail "round $round: ctx ls: $ls"
  names=$(awk '{print $1}' <<<"$ls")
  [ "$names" = base ] && pass "round $round: ctx ls lists exactly base" || fail "round $round: ctx ls: $ls"
  for n in $names; do
    "$LLAMAY_BIN" ctx pull --store "$STORE" --name "$n" -o "$T/pulled" >/dev/null 2>"$T/pull.err" &&
      "$LLAMAY_BIN" ctx inspect "$T/pulled" >/dev/null 2>&1 || fail "round $round: $n does not verify: $(cat "$T/pull.err")"
  done
  stop_server "$SERVER_PID" || fail "round $round: exit $?"
done

# A torn write, made by hand: a truncated chunk, then a truncated manifest, in a copy of the store.
cp -r "$STORE" "$T/torn"
manifest=$(find "$T/torn" -path '*/snapshots/base')
# A chunk of base's current version: its name (the hex of its hash) is in the manifest's chunk list. Older
# chunks stay in the store (an interrupted push's, the previous version's) and truncating one of those
# would break nothing.
chunk=$(python3 - "$manifest" <<'PY'
import pathlib, sys
manifest = pathlib.Path(sys.argv[1])
listed = manifest.read_bytes().hex()
for c in sorted(manifest.parent.parent.glob("chunks/*")):
    if "~tmp" not in c.name and c.stat().st_size > 100_000 and c.name in listed:
        print(c)
        break
PY
)
[ -n "$chunk" ] || fail "no chunk of base's manifest found in the store"
for victim in "$chunk" "$manifest"; do
  what=$([ "$victim" = "$manifest" ] && echo manifest || echo chunk)
  cp "$victim" "$T/saved"
  truncate -s $(($(stat -c %s "$victim") / 2)) "$victim"
  out=$("$LLAMAY_BIN" ctx pull --store "$T/torn" --name base -o "$T/torn.llamayctx" 2>&1) && prc=0 || prc=$?
  [ "$prc" -ne 0 ] && grep -q damaged <<<"$out" && [ ! -e "$T/torn.llamayctx" ] &&
    pass "a truncated $what: ctx pull exit $prc, nothing written: $out" || fail "a truncated $what: ctx pull exit $prc: $out"
  start_server "torn-$what" --store "$T/torn"
  r=$(post "$SERVER_URL/v1/contexts/restore" -d '{"name": "base"}' -w ' %{http_code}')
  grep -q ' 502$' <<<"$r" && grep -q store_object_damaged <<<"$r" && pass "a truncated $what: restore 502 store_object_damaged" ||
    fail "a truncated $what: restore $r"
  [ "$(curl -fsS "$SERVER_URL/v1/contexts" | jq '.data | length')" = 0 ] || fail "a truncated $what: a context appeared"
  stop_server "$SERVER_PID" || true
  cp "$T/saved" "$victim"
done
[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all push-fault checks passed"
