#!/usr/bin/env bash
# `llamay serve --store s3://...` against npm s3rver behind the fault proxy of tests/e2e/lib/s3_fault_server.mjs
# (it checks every request's SigV4 signature with the AWS SDK's own signer and injects faults on command):
#   - push, restore by name, and a session shared by two instances through S3 continue exactly;
#   - the store answering 500, truncating objects, or down: clear 502s, the server stays up, the held
#     context is unchanged and still continues;
#   - wrong credentials: a 502 that names the S3 error and never the secret;
#   - kill -9 of llamay in the middle of a push (its PUTs held back by the proxy): the snapshot's previous
#     version is intact and restores on a new instance.
# Skipped (77) without node or tests/e2e/node_modules (scripts/setup installs them).
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

start_server a --store "$STORE" --share-sessions
A=$SERVER_URL A_PID=$SERVER_PID
start_server b --store "$STORE" --share-sessions
B=$SERVER_URL
start_server single
ONE=$SERVER_URL
PROMPT='{"prompt": "an agent that reads files and runs tests, turn after turn"}'

# 1. Push, restore by name, and a session alternating between a and b through S3.
id=$(post "$A/v1/contexts" -d "$PROMPT" | jq -r .id)
one=$(post "$ONE/v1/contexts" -d "$PROMPT" | jq -r .id)
r=$(post "$A/v1/contexts/$id/push" -d '{"name": "base"}')
[ "$(jq .chunks_sent <<<"$r")" -ge 0 ] && [ "$(jq -r .name <<<"$r")" = base ] && pass "push to S3" || fail "push: $r"
rid=$(post "$B/v1/contexts/restore" -d '{"name": "base"}' | jq -r .id)
[ "$rid" != null ] && pass "restore by name from S3 on another instance" || fail "restore by name"
want="" got="" i=0
for t in " one" " two" " three" " four"; do
  want+=$(turn "$ONE" "$one" "$t")
  if [ $((i % 2)) -eq 0 ]; then url=$B; else url=$A; fi
  got+=$(turn "$url" "$id" "$t")
  i=$((i + 1))
done
[ "$want" = "$got" ] && pass "a session moving between instances through S3 continues exactly" || fail "want $want got $got"

# 2. Faults: 500s, truncated objects, store down.
s3cmd '{"cmd":"fault","mode":"status","status":500,"code":"InternalError","count":-1}'
r=$(post "$A/v1/contexts/$id/push" -d '{"name": "during500"}' -w ' %{http_code}')
grep -q ' 502$' <<<"$r" && grep -q store_error <<<"$r" && pass "store answering 500: 502 store_error" || fail "500: $r"
s3cmd '{"cmd":"reset"}'
s3cmd '{"cmd":"fault","mode":"truncate","keep":100,"count":-1,"methods":["GET"]}'
r=$(post "$B/v1/contexts/restore" -d '{"name": "base"}' -w ' %{http_code}')
grep -q ' 502$' <<<"$r" && pass "truncated objects are refused (502)" || fail "truncate: $r"
s3cmd '{"cmd":"reset"}'
s3cmd '{"cmd":"fault","mode":"drop","count":-1}'
r=$(post "$A/v1/contexts/$id/push" -d '{"name": "down"}' -w ' %{http_code}')
grep -q ' 502$' <<<"$r" && pass "store down: 502" || fail "down: $r"
s3cmd '{"cmd":"reset"}'
curl -fsS -o /dev/null "$A/health" && curl -fsS -o /dev/null "$B/health" && pass "both servers are up" || fail "a server is down"
post "$A/v1/contexts/$id/push" -d '{"name": "after"}' | grep -q '"name":"after"' && pass "the held context pushes once the store is back" ||
  fail "push after the faults"

# 3. Wrong credentials: named, secret never shown.
AWS_SECRET_ACCESS_KEY=wrong-secret start_server wrong --store "$STORE"
W=$SERVER_URL
wid=$(post "$W/v1/contexts" -d "$PROMPT" | jq -r .id)
r=$(post "$W/v1/contexts/$wid/push" -d '{"name": "x"}' -w ' %{http_code}')
grep -q ' 502$' <<<"$r" && grep -q "access denied: HTTP 403" <<<"$r" && pass "wrong credentials: 502, access denied" ||
  fail "wrong credentials: $r"
if grep -q -e "$S3_SECRET" -e wrong-secret <<<"$r" || grep -q -e "$S3_SECRET" -e wrong-secret "$T"/server-*.log; then
  fail "a secret appears in a log or answer"
else
  pass "no secret in logs or answers"
fi

# 4. kill -9 during a push: the previous version of the snapshot survives.
post "$A/v1/contexts/$id/push" -d '{"name": "survivor"}' >/dev/null
old=$(post "$B/v1/contexts/restore" -d '{"name": "survivor"}' | jq -r .tokens)
turn "$A" "$id" " a longer turn that changes the context" >/dev/null
s3cmd '{"cmd":"fault","mode":"delay","delay_ms":3000,"count":-1,"methods":["PUT"]}'
(post "$A/v1/contexts/$id/push" -d '{"name": "survivor"}' >/dev/null 2>&1 || true) &
sleep 1
kill -KILL "$A_PID"
s3cmd '{"cmd":"reset"}'
start_server c --store "$STORE"
r=$(post "$SERVER_URL/v1/contexts/restore" -d '{"name": "survivor"}')
[ "$(jq -r .tokens <<<"$r")" = "$old" ] && pass "after kill -9 mid-push, the previous snapshot restores intact" ||
  fail "after kill -9: $r (want $old tokens)"
[ "$fails" -eq 0 ] || exit 1
