#!/usr/bin/env bash
# Sessions that move between instances (issue 10, part 3): two `llamay serve --store DIR --share-sessions`
# behind HAProxy (round robin, one request per connection, so consecutive turns alternate between the
# instances). An agent's session, created through the balancer, runs 6 turns, each on the other instance
# from the one before; its output (text and logprobs, temperature 0) must equal the same session's on a
# single instance. Then each instance is stopped in turn (SIGTERM) and the session continues on the other;
# and an instance killed with SIGKILL right after a turn loses nothing: the store holds that turn. A stored
# response made on one instance continues on another.
# Skipped (77) when haproxy is not installed. Run by run.sh (ctest -L e2e); the servers are started here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
HAPROXY_PID=""
cleanup() {
  [ -n "$HAPROXY_PID" ] && kill "$HAPROXY_PID" 2>/dev/null || true
  stop_all_servers
}
trap cleanup EXIT
command -v haproxy >/dev/null || { echo "skipped: haproxy is not installed (scripts/setup installs it)"; exit 77; }
T=$LLAMAY_E2E_TMP
STORE=$T/store

start_server a --store "$STORE" --share-sessions
A_URL=$SERVER_URL A_PID=$SERVER_PID
start_server b --store "$STORE" --share-sessions
B_URL=$SERVER_URL B_PID=$SERVER_PID
start_server single
ONE_URL=$SERVER_URL

LB_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$T/haproxy.cfg" <<CFG
global
  maxconn 64
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  option http-server-close
frontend llamay
  bind 127.0.0.1:$LB_PORT
  default_backend instances
backend instances
  balance roundrobin
  server a ${A_URL#http://}
  server b ${B_URL#http://}
CFG
haproxy -f "$T/haproxy.cfg" -db >"$T/haproxy.log" 2>&1 &
HAPROXY_PID=$!
LB=http://127.0.0.1:$LB_PORT
for _ in $(seq 100); do curl -fsS -o /dev/null --max-time 2 "$LB/health" && break; sleep 0.1; done

# turn URL SESSION TEXT: one completion on the session; prints "text logprobs".
turn() {
  curl -fsS --max-time "$E2E_MAX_TIME" "$1/v1/completions" -H 'Content-Type: application/json' -d "$(jq -nc --arg p "$3" --arg s "$2" \
    '{prompt: $p, max_tokens: 8, temperature: 0, logprobs: 2, llamay_session: $s}')" |
    jq -c '[.choices[0].text, .choices[0].logprobs.token_logprobs]'
}
create() {
  curl -fsS --max-time "$E2E_MAX_TIME" "$1/v1/contexts" -H 'Content-Type: application/json' \
    -d '{"prompt": "You are an agent. Tools: read_file, run_tests. The user asks you to fix a failing test."}' | jq -r .id
}
TURNS=(" call read_file(parser.c)" " result: line 42 overflows" " call run_tests()" " result: 3 failed" " call read_file(lexer.c)" " result: ok")

one=$(create "$ONE_URL")
lb=$(create "$LB")
want="" got=""
for t in "${TURNS[@]}"; do
  want+=$(turn "$ONE_URL" "$one" "$t")
  got+=$(turn "$LB" "$lb" "$t")
done
[ "$want" = "$got" ] && pass "6 turns alternating between two instances equal one instance's" ||
  fail "alternating output differs: want $want got $got"
served_a=$(grep -c "" "$T/server-a.log" || true)
[ "$(curl -fsS "$A_URL/v1/contexts" | jq '.data | length')" -ge 1 ] && [ "$(curl -fsS "$B_URL/v1/contexts" | jq '.data | length')" -ge 1 ] &&
  pass "both instances held the session" || fail "the balancer did not alternate (a: $served_a)"

# Stop a (SIGTERM): the session continues on b alone, and back on a new instance after it.
stop_server "$A_PID" || fail "a did not stop cleanly"
want=$(turn "$ONE_URL" "$one" " next step")
got=$(turn "$B_URL" "$lb" " next step")
[ "$want" = "$got" ] && pass "the session continues on b after a stopped" || fail "after a stopped: want $want got $got"
# kill -9 of b right after a turn: the store holds that turn; a fresh instance continues from it.
kill -KILL "$B_PID"
start_server c --store "$STORE" --share-sessions
want=$(turn "$ONE_URL" "$one" " final")
got=$(turn "$SERVER_URL" "$lb" " final")
[ "$want" = "$got" ] && pass "after kill -9, a new instance continues from the store exactly" ||
  fail "after kill -9: want $want got $got"
# An unknown session is still a 404, and a session id that is not a valid name never reaches the store.
code=$(curl -s -o /dev/null -w '%{http_code}' "$SERVER_URL/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"x","max_tokens":1,"llamay_session":"ctx_0000000000000000"}')
[ "$code" = 404 ] && pass "an unknown session is 404" || fail "unknown session: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$SERVER_URL/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"x","max_tokens":1,"llamay_session":"../../etc/passwd"}')
[ "$code" = 404 ] && pass "a session id with a path in it is 404" || fail "path session id: $code"
# A stored response (the Responses API) is a session like the others: made on c, continued on a new
# instance d through the store, with the earlier turns read from the context rather than prefilled.
C_URL=$SERVER_URL
first=$(curl -fsS --max-time "$E2E_MAX_TIME" "$C_URL/v1/responses" -H 'Content-Type: application/json' \
  -d '{"instructions":"You are an agent that fixes failing tests in a C project.","input":"parser.c fails","max_output_tokens":4,"temperature":0}')
rid=$(echo "$first" | jq -r .id)
start_server d --store "$STORE" --share-sessions
next=$(curl -fsS --max-time "$E2E_MAX_TIME" "$SERVER_URL/v1/responses" -H 'Content-Type: application/json' \
  -d "{\"previous_response_id\":\"$rid\",\"input\":\"and lexer.c?\",\"max_output_tokens\":4,\"temperature\":0}")
cached=$(echo "$next" | jq '.usage.input_tokens_details.cached_tokens')
prompt=$(echo "$first" | jq '.usage.input_tokens')
[ "$(echo "$next" | jq -r .previous_response_id)" = "$rid" ] && [ "$cached" -ge "$prompt" ] &&
  pass "a stored response made on one instance continues on another (cached $cached >= $prompt)" ||
  fail "stored response across instances: $next"
[ "$fails" -eq 0 ] || exit 1
