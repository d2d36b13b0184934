#!/usr/bin/env bash
# A store that stops answering (issue 23, faults): the S3 test server (s3rver behind
# tests/e2e/lib/s3_fault_server.mjs) is killed with kill -9 in the middle of a push, its PUTs held back,
# then restarted on the same port and data. What docs/deploy.md ("Consistency") promises, checked:
#   - the push gets a clear error: 502 store_error, Retry-After, a message naming the store, the PUT and
#     the attempts; the server stays up and the context is kept;
#   - a --share-sessions turn while the store is down is answered normally (200), and the server logs
#     "session ... not saved to the store"; the session is kept and continues on this instance;
#   - once the store is back, the next commit writes it: another instance continues the session exactly
#     as a single instance that ran every answered turn (text and logprobs, temperature 0), and the push
#     succeeds and restores.
# Skipped (77) without node or tests/e2e/node_modules (scripts/setup installs them). Run by run.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
T=$LLAMAY_E2E_TMP
source "$here/lib/s3.sh"
require_s3
start_s3 1
post() { curl -s --max-time "$E2E_MAX_TIME" -H 'Content-Type: application/json' "$@"; }
turn() {
  post "$1/v1/completions" -d "$(jq -nc --arg p "$3" --arg s "$2" '{prompt: $p, max_tokens: 6, temperature: 0, logprobs: 2, llamay_session: $s}')" |
    jq -c '[.choices[0].text, .choices[0].logprobs.token_logprobs, .error.code]'
}
PROMPT='{"prompt": "an agent that reads files and runs tests, turn after turn"}'

start_server a --store "$STORE" --share-sessions
A=$SERVER_URL A_LOG=$SERVER_LOG
start_server b --store "$STORE" --share-sessions
B=$SERVER_URL
start_server single
ONE=$SERVER_URL
sid=$(post "$A/v1/contexts" -d "$PROMPT" | jq -r .id)
one=$(post "$ONE/v1/contexts" -d "$PROMPT" | jq -r .id)
[ "$(turn "$A" "$sid" " one")" = "$(turn "$ONE" "$one" " one")" ] && pass "a session on a, committed through S3" || fail "first turn"

# kill -9 of the store during a push: its PUTs are held 3 s by the proxy, the kill comes after 1 s.
s3cmd '{"cmd":"fault","mode":"delay","delay_ms":3000,"count":-1,"methods":["PUT"]}'
post "$A/v1/contexts/$sid/push" -d '{"name": "p1"}' -D "$T/push.headers" -o "$T/push.out" -w '%{http_code}' >"$T/push.code" &
pusher=$!
sleep 1
kill_s3
t0=$SECONDS
wait "$pusher" || true
r=$(cat "$T/push.out")
echo "phase: the store was killed with a PUT held; the push answered $(cat "$T/push.code") $((SECONDS - t0)) s later"
[ "$(cat "$T/push.code")" = 502 ] && [ "$(jq -r .error.code <<<"$r")" = store_error ] && grep -qi '^retry-after: 1' "$T/push.headers" &&
  grep -q "s3://llamay-e2e/e2e" <<<"$r" && grep -q 'PUT' <<<"$r" && grep -q 'attempts' <<<"$r" &&
  pass "the push: 502 store_error, Retry-After: $(jq -r .error.message <<<"$r")" || fail "the push: $(cat "$T/push.code") $r"
curl -fsS -o /dev/null "$A/health" && [ "$(curl -fsS "$A/v1/contexts" | jq --arg s "$sid" '[.data[] | select(.id == $s)] | length')" = 1 ] &&
  pass "a is up and keeps the session" || fail "a is down or lost the session"

# kill -9 of the store during a turn's write-through: the turn's commit PUTs are held, the kill comes
# after 1 s. The commit fails; the turn is answered normally and logged as not saved.
start_s3 2
s3cmd '{"cmd":"fault","mode":"delay","delay_ms":3000,"count":-1,"methods":["PUT"]}'
want=$(turn "$ONE" "$one" " two")
turn "$A" "$sid" " two" >"$T/two.out" &
turner=$!
sleep 1
kill_s3
wait "$turner" || true
[ "$want" = "$(cat "$T/two.out")" ] && pass "store killed during the turn's commit: the turn is answered normally, exactly" ||
  fail "store killed during the commit: want $want got $(cat "$T/two.out")"
n=$(grep -c "session $sid not saved to the store" "$A_LOG" || true)
[ "$n" = 1 ] && pass "a logged it: $(grep -m1 "session $sid not saved" "$A_LOG" | cut -c1-150)..." ||
  fail "a logged $n 'not saved' lines: $(tail -n 3 "$A_LOG")"
# A turn that starts while the store is down cannot check for a newer generation: refused with the
# store's error (502 store_error, Retry-After: the client retries), the session kept as it was.
r=$(post "$A/v1/completions" -D "$T/three.headers" -w ' %{http_code}' \
  -d "$(jq -nc --arg s "$sid" '{prompt: " three", max_tokens: 6, temperature: 0, llamay_session: $s}')")
grep -qE ' 502$' <<<"$r" && [ "$(jq -r .error.code <<<"${r% *}")" = store_error ] && grep -q 'unreachable' <<<"$r" &&
  grep -qi '^retry-after' "$T/three.headers" &&
  pass "a turn that starts while the store is down: a clear, retryable error: ${r: -4} $(jq -r .error.message <<<"${r% *}" | cut -c1-120)..." ||
  fail "a turn while the store is down: $r"
curl -fsS -o /dev/null "$A/health" && [ "$(curl -fsS "$A/v1/contexts" | jq --arg s "$sid" '[.data[] | select(.id == $s)] | length')" = 1 ] &&
  pass "a is up and keeps the session" || fail "a is down or lost the session"

# The store comes back (same port, same data): the next commit writes every answered turn.
start_s3 3
want=$(turn "$ONE" "$one" " four")
got=$(turn "$A" "$sid" " four")
[ "$want" = "$got" ] && pass "store back: the next turn on a" || fail "store back: want $want got $got"
n=$(grep -c "session $sid not saved to the store" "$A_LOG" || true)
[ "$n" = 1 ] && pass "store back: the turn's commit succeeded" || fail "store back: $n 'not saved' lines"
want=$(turn "$ONE" "$one" " five")
got=$(turn "$B" "$sid" " five")
[ "$want" = "$got" ] && [ "$want" != "[null,null,null]" ] && pass "b continues the session with every answered turn, exactly" ||
  fail "b: want $want got $got"
r=$(post "$A/v1/contexts/$sid/push" -d '{"name": "p1"}')
[ "$(jq -r .name <<<"$r")" = p1 ] && pass "the push, retried once the store is back, succeeds" || fail "push again: $r"
r=$(post "$B/v1/contexts/restore" -d '{"name": "p1"}')
[ "$(jq -r .id <<<"$r")" != null ] && pass "p1 restores on b ($(jq -r .tokens <<<"$r") tokens)" || fail "restore p1: $r"
[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all store-down checks passed"
