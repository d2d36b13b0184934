#!/usr/bin/env bash
# kill -9 of the server during a snapshot download (issue 23, faults). A context of about 3,700 tokens
# (15 MB at f32) is pushed to a directory store and downloaded whole (both answered 200); then a second
# download, read at about 6 MB/s, is cut by kill -9 of the server once 2 MB have arrived. Afterwards:
#   - the client can tell: its read fails (the chunked body never ended), fewer bytes than the whole file;
#   - the partial file loads nowhere: `ctx inspect` exits 2 and a restore is 400 snapshot_truncated,
#     saying how many bytes the header declares, and no context appears;
#   - what was answered is intact: the whole download and the pushed snapshot restore on a new server with
#     every token and continue alike; the store lists it and `ctx pull` verifies every chunk.
# Prints the phase the kill hit (mid-download, or after it when the machine was too slow to cut it).
# Run by run.sh (ctest -L faults); the servers are started here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
trap stop_all_servers EXIT
T=$LLAMAY_E2E_TMP
STORE=$T/store
post() { curl -sS --max-time "$E2E_MAX_TIME" -H 'Content-Type: application/json' "$@"; }
size() { stat -c %s "$1" 2>/dev/null || echo 0; }
turn() {
  post "$1/v1/completions" -d "{\"prompt\": \" and then\", \"max_tokens\": 6, \"temperature\": 0, \"logprobs\": 2, \"llamay_session\": \"$2\"}" |
    jq -c '[.choices[0].text, .choices[0].logprobs.token_logprobs]'
}

start_server a --store "$STORE"
A=$SERVER_URL A_PID=$SERVER_PID
python3 -c "import json; print(json.dumps({'prompt': 'a context large enough that its download takes a while ' * 52}))" >"$T/big.json"
made=$(post "$A/v1/contexts" -d @"$T/big.json")
id=$(jq -r .id <<<"$made") tokens=$(jq -r .tokens <<<"$made")
[ "$id" != null ] || { echo "FAIL create: $made"; exit 1; }
r=$(post "$A/v1/contexts/$id/push" -d '{"name": "base"}')
[ "$(jq -r .name <<<"$r")" = base ] && pass "pushed $id ($tokens tokens) as base" || fail "push: $r"
code=$(curl -sS -o "$T/whole.llamayctx" -w '%{http_code}' "$A/v1/contexts/$id/snapshot?precision=f32")
whole=$(size "$T/whole.llamayctx")
[ "$code" = 200 ] && pass "whole download: $whole bytes" || fail "whole download: $code"

# The cut download: read slowly (64 KiB every 10 ms), so that the server is still writing when it dies.
python3 - "$A/v1/contexts/$id/snapshot?precision=f32" "$T/part.llamayctx" >"$T/curl.err" 2>&1 <<'PY' &
import sys, time, urllib.request
with urllib.request.urlopen(sys.argv[1]) as r, open(sys.argv[2], "wb") as out:
    try:
        while True:
            b = r.read(65536)
            if not b:
                break
            out.write(b)
            out.flush()
            time.sleep(0.01)
    except Exception as e:
        print(f"{type(e).__name__}: {e}"[:200])
        sys.exit(18)
PY
dl=$!
for _ in $(seq 1000); do
  [ "$(size "$T/part.llamayctx")" -ge 2000000 ] && break
  kill -0 "$dl" 2>/dev/null || break
  sleep 0.01
done
kill -KILL "$A_PID"
at=$(size "$T/part.llamayctx")
rc=0
wait "$dl" || rc=$?
wait "$A_PID" 2>/dev/null || true
got=$(size "$T/part.llamayctx")
if [ "$got" -lt "$whole" ]; then
  echo "phase: mid-download (killed at $at bytes, the client has $got of $whole)"
  [ "$rc" -ne 0 ] && pass "the client sees the cut download fail (reader exit $rc: $(tr -d '\n' <"$T/curl.err"))" ||
    fail "reader exit 0 on a download of $got of $whole bytes"
  out=$("$LLAMAY_BIN" ctx inspect "$T/part.llamayctx" 2>&1) && irc=0 || irc=$?
  [ "$irc" = 2 ] && grep -q truncated <<<"$out" && pass "ctx inspect refuses the partial file (exit 2): $out" ||
    fail "ctx inspect on the partial file: exit $irc: $out"
else
  echo "phase: after the download (the kill came late: the client had all $got bytes)"
  [ "$rc" = 0 ] && cmp -s "$T/whole.llamayctx" "$T/part.llamayctx" && pass "the download finished before the kill, whole" ||
    fail "a download of $got bytes that curl reports as $rc or differs from the whole file"
fi

# A new server on the same store.
start_server b --store "$STORE"
B=$SERVER_URL
if [ "$got" -lt "$whole" ]; then
  r=$(curl -sS -w ' %{http_code}' "$B/v1/contexts/restore" --data-binary @"$T/part.llamayctx")
  grep -q ' 400$' <<<"$r" && grep -q '"snapshot_truncated"' <<<"$r" && grep -q "the header declares $whole" <<<"$r" &&
    pass "restoring the partial download: 400 snapshot_truncated" || fail "restoring the partial download: $r"
  n=$(curl -fsS "$B/v1/contexts" | jq '.data | length')
  [ "$n" = 0 ] && pass "no context appeared from the partial file" || fail "$n contexts after a refused restore"
fi
# Every prefix of the whole file, cut at 16 points, is refused as truncated (never restored as something else).
bad=0
for k in $(seq 1 16); do
  head -c $((whole * k / 17)) "$T/whole.llamayctx" >"$T/cut.llamayctx"
  code=$(curl -sS -o "$T/cut.out" -w '%{http_code}' "$B/v1/contexts/restore" --data-binary @"$T/cut.llamayctx")
  [ "$code" = 400 ] && grep -q snapshot_ "$T/cut.out" || { bad=$((bad + 1)); echo "  cut at $((whole * k / 17)): $code $(cat "$T/cut.out")"; }
done
[ "$bad" = 0 ] && pass "16 truncations of the file: each 400" || fail "$bad truncations were not refused"
f=$(curl -sS --max-time "$E2E_MAX_TIME" "$B/v1/contexts/restore" --data-binary @"$T/whole.llamayctx")
s=$(post "$B/v1/contexts/restore" -d '{"name": "base"}')
[ "$(jq -r .tokens <<<"$f")" = "$tokens" ] && [ "$(jq -r .tokens <<<"$s")" = "$tokens" ] &&
  pass "the answered download and the pushed snapshot restore after kill -9 ($tokens tokens each)" ||
  fail "after kill -9: file $f, store $s (want $tokens tokens)"
tf=$(turn "$B" "$(jq -r .id <<<"$f")") ts=$(turn "$B" "$(jq -r .id <<<"$s")")
[ "$tf" = "$ts" ] && [ "$tf" != '[null,null]' ] && pass "both continue alike: $tf" || fail "continuations differ: $tf vs $ts"
ls=$("$LLAMAY_BIN" ctx ls --store "$STORE" 2>&1)
grep -q '^base ' <<<"$ls" && pass "ctx ls lists base" || fail "ctx ls: $ls"
"$LLAMAY_BIN" ctx pull --store "$STORE" --name base -o "$T/pulled.llamayctx" >/dev/null 2>&1 &&
  "$LLAMAY_BIN" ctx inspect "$T/pulled.llamayctx" >/dev/null 2>&1 && pass "ctx pull verifies base" || fail "ctx pull base"
[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all download-fault checks passed"
