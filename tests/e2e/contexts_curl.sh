#!/usr/bin/env bash
# The /v1/contexts routes end to end with curl, as the seed guide uses them, checked for exactness at
# temperature 0: a context built from a prompt, forked 4 ways, each branch continuing exactly as the parent
# does (text and log probabilities) and exactly as the same tokens computed from scratch; its snapshot
# downloaded and restored on a freshly started server, on a server with 128-token pages (the snapshot was
# written with 64), and through --state-dir across a restart, each continuing exactly. No 5xx, ever.
# Run by run.sh (ctest -L e2e), which starts the main server (demo model, 64-token pages). With
# LLAMAY_E2E_MODEL set (a GGUF file, which run.sh's server was also started with), every server and the
# tokenizer use that model instead: ctest runs it on a hybrid (tiny-granitehybrid) and a sliding-window
# model (tiny-gemma3) too, whose snapshots are format version 2.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
trap stop_all_servers EXIT
U=$LLAMAY_URL
T=$LLAMAY_E2E_TMP
MODEL=()
if [ -n "${LLAMAY_E2E_MODEL:-}" ]; then
  [ -f "$LLAMAY_E2E_MODEL" ] || { echo "skipped: $LLAMAY_E2E_MODEL is absent"; exit 77; }
  MODEL=(-m "$LLAMAY_E2E_MODEL")
fi
checks=0
fails=0

# Both print to stderr, so a value captured with $(...) is never mixed with them. A check run inside $(...)
# cannot count; its caller compares what it printed instead.
pass() { checks=$((checks + 1)); echo "ok   $*" >&2; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $*" >&2; }
# expect_eq WHAT GOT WANT
expect_eq() { if [ "$2" == "$3" ]; then pass "$1"; else fail "$1: got '$2', want '$3'"; fi; }

# req METHOD URL [curl args...]: the body lands in $T/body, the status in $STATUS. A 5xx fails the test.
STATUS=0
req() {
  local method=$1 url=$2
  shift 2
  STATUS=$(curl -sS -o "$T/body" -w '%{http_code}' -X "$method" "$url" "$@")
  if [ "$STATUS" -ge 500 ] || [ "$STATUS" -eq 0 ]; then fail "$method $url -> $STATUS: $(head -c 300 "$T/body")"; fi
}
# js FILTER: a jq filter over the JSON body of the last request (strings print raw).
js() { jq -r "$1" "$T/body"; }

# A prompt long enough to cross a 64-token and a 128-token page (the demo's vocabulary is bytes; a space
# is three <unk> tokens), and a continuation given as token ids.
PROMPT="You are llamay's test assistant. Answer briefly, cite nothing, and never invent facts; this shared system prompt is long enough to cross a 64-token page and a 128-token page."
# A model's own vocabulary packs more into a token: the prompt four times over still crosses both pages.
[ ${#MODEL[@]} -eq 0 ] || PROMPT="$PROMPT $PROMPT $PROMPT $PROMPT"
PROMPT_IDS=$("$LLAMAY_BIN" tokenize "${MODEL[@]}" -p "$PROMPT" 2>/dev/null)
N_PROMPT=$(jq length <<<"$PROMPT_IDS")
MORE='[70,71,72,73,74]'
MAX=24

# continue_session URL ID: a greedy continuation of context ID by $MORE; prints "text<TAB>logprobs".
continue_session() {
  req POST "$1/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"prompt\":$MORE,\"max_tokens\":$MAX,\"temperature\":0,\"logprobs\":1,\"llamay_session\":\"$2\"}"
  if [ "$STATUS" != 200 ]; then
    fail "continue $2 on $1 -> $STATUS: $(head -c 300 "$T/body")"
    echo "error"
    return
  fi
  js '.choices[0].text + "\t" + (.choices[0].logprobs | tojson)'
}

# --- build, fork 4 ways -------------------------------------------------------------------------------
req POST "$U/v1/contexts" -d "$(jq -nc --arg p "$PROMPT" '{prompt: $p}')"
expect_eq "create: status" "$STATUS" 200
PARENT=$(js .id)
expect_eq "create: holds every prompt token" "$(js .tokens)" "$N_PROMPT"
[ "$N_PROMPT" -gt 128 ] && pass "create: $N_PROMPT tokens span 3+ pages of 64" || fail "create: only $N_PROMPT tokens"
[ "$(js .pages)" -ge 1 ] || [ ${#MODEL[@]} -gt 0 ] && pass "create: $(js .pages) pages" || fail "create: pages $(js .pages)"

req POST "$U/v1/contexts/$PARENT/fork?n=4"
expect_eq "fork: status" "$STATUS" 200
expect_eq "fork: parent" "$(js .parent)" "$PARENT"
expect_eq "fork: 4 branches" "$(js '.branches | length')" 4
expect_eq "fork: each branch holds the parent's tokens" "$(js '[.branches[].tokens] | unique | tojson')" "[$N_PROMPT]"
BRANCHES=$(js '[.branches[].id] | join(" ")')
expect_eq "fork: distinct ids" "$(tr ' ' '\n' <<<"$BRANCHES $PARENT" | sort -u | wc -l)" 5

req GET "$U/v1/contexts"
for id in $PARENT $BRANCHES; do
  expect_eq "list: $id" "$(js "[.data[] | select(.id == \"$id\") | .tokens] | tojson")" "[$N_PROMPT]"
done

# --- snapshot before anything continues: the file holds the prompt and nothing else -------------------
req GET "$U/v1/contexts/$PARENT/snapshot"
cp "$T/body" "$T/base.llamayctx"
expect_eq "snapshot: status" "$STATUS" 200
SNAP_BYTES=$(stat -c %s "$T/base.llamayctx")
[ "$SNAP_BYTES" -gt 1000 ] && pass "snapshot: $SNAP_BYTES bytes" || fail "snapshot: only $SNAP_BYTES bytes"
req GET "$U/v1/contexts"
expect_eq "snapshot: leaves the parent's token count" "$(js "[.data[] | select(.id == \"$PARENT\") | .tokens] | tojson")" "[$N_PROMPT]"

# --- every branch continues exactly as the parent, and as the same tokens from scratch -----------------
WANT=$(continue_session "$U" "$PARENT")
[ -n "$(cut -f1 <<<"$WANT")" ] && pass "parent continues: '$(cut -f1 <<<"$WANT" | head -c 40)...'" || fail "parent: empty continuation"
for b in $BRANCHES; do
  expect_eq "branch $b continues exactly as its parent (text and logprobs)" "$(continue_session "$U" "$b")" "$WANT"
done
FULL=$(jq -nc --argjson a "$PROMPT_IDS" --argjson b "$MORE" '$a + $b')
req POST "$U/v1/completions" -d "{\"prompt\":$FULL,\"max_tokens\":$MAX,\"temperature\":0}"
expect_eq "the same tokens from scratch continue the same way" "$(js '.choices[0].text')" "$(cut -f1 <<<"$WANT")"
req GET "$U/v1/contexts"
GROWN=$((N_PROMPT + 5 + MAX))
for id in $PARENT $BRANCHES; do
  expect_eq "after continuing, $id holds prompt + continuation" "$(js "[.data[] | select(.id == \"$id\") | .tokens] | tojson")" "[$GROWN]"
done
# A second turn on two of them: still in lockstep.
set -- $BRANCHES
WANT2=$(continue_session "$U" "$PARENT")
expect_eq "second turn: branch $1 = parent" "$(continue_session "$U" "$1")" "$WANT2"

# --- restore on a freshly started server (same settings) ----------------------------------------------
start_server fresh "${MODEL[@]}"
FRESH=$SERVER_URL
FRESH_PID=$SERVER_PID
req POST "$FRESH/v1/contexts/restore" --data-binary @"$T/base.llamayctx" -H 'Content-Type: application/octet-stream'
expect_eq "fresh server: restore status" "$STATUS" 200
R=$(js .id)
expect_eq "fresh server: restored tokens" "$(js .tokens)" "$N_PROMPT"
expect_eq "fresh server: the restored context continues exactly" "$(continue_session "$FRESH" "$R")" "$WANT"
stop_server "$FRESH_PID" && pass "fresh server: clean shutdown" || fail "fresh server: shutdown exit $?"

# --- a 128-token-page server restores the 64-token-page snapshot ---------------------------------------
start_server pages128 "${MODEL[@]}" --page-tokens 128
P128=$SERVER_URL
req POST "$P128/v1/contexts/restore" --data-binary @"$T/base.llamayctx"
expect_eq "128-token pages: restore status" "$STATUS" 200
R=$(js .id)
expect_eq "128-token pages: restored tokens" "$(js .tokens)" "$N_PROMPT"
# (One page list per attention group: the demo has one; a windowed group holds its window only.)
[ ${#MODEL[@]} -gt 0 ] || expect_eq "128-token pages: pages" "$(js .pages)" "$(((N_PROMPT + 127) / 128))"
req POST "$P128/v1/contexts/$R/fork?n=1"
R2=$(js '.branches[0].id')
expect_eq "128-token pages: the restored context continues exactly" "$(continue_session "$P128" "$R")" "$WANT"
# And back: a snapshot written with 128-token pages restores on the 64-token-page server.
req GET "$P128/v1/contexts/$R2/snapshot"
cp "$T/body" "$T/p128.llamayctx"
expect_eq "128-token pages: snapshot status" "$STATUS" 200
req POST "$U/v1/contexts/restore" --data-binary @"$T/p128.llamayctx"
expect_eq "64-token pages restore a 128-token-page snapshot" "$STATUS" 200
R3=$(js .id)
expect_eq "... and it continues exactly" "$(continue_session "$U" "$R3")" "$WANT"
req DELETE "$U/v1/contexts/$R3"

# --- --state-dir: held contexts survive a restart -------------------------------------------------------
mkdir -p "$T/state"
start_server state1 "${MODEL[@]}" --state-dir "$T/state"
S1=$SERVER_URL
S1_PID=$SERVER_PID
req POST "$S1/v1/contexts/restore" --data-binary @"$T/base.llamayctx"
SID=$(js .id)
stop_server "$S1_PID" && pass "state dir: clean shutdown" || fail "state dir: shutdown exit $?"
saved=$("$LLAMAY_BIN" ctx ls --store "$T/state" 2>/dev/null | awk '{print $1}' | tr '\n' ' ')
grep -qw "$SID" <<<"$saved" && pass "state dir: saved $saved" || fail "state dir: $SID not saved ($saved)"
start_server state2 "${MODEL[@]}" --state-dir "$T/state"
S2=$SERVER_URL
req GET "$S2/v1/contexts"
expect_eq "state dir: the context is back" "$(js "[.data[] | select(.id == \"$SID\") | .tokens] | tojson")" "[$N_PROMPT]"
expect_eq "state dir: and continues exactly" "$(continue_session "$S2" "$SID")" "$WANT"
stop_all_servers

# --- a context built from messages, forked, continued by chat completions ------------------------------
req POST "$U/v1/contexts" -d '{"messages":[{"role":"system","content":"You are terse."}]}'
expect_eq "chat context: status" "$STATUS" 200
CHAT=$(js .id)
CHAT_TOKENS=$(js .tokens)
req POST "$U/v1/contexts/$CHAT/fork?n=2"
CB=$(js '[.branches[].id] | join(" ")')
CHAT_REQ='"messages":[{"role":"user","content":"hi"}],"max_tokens":12,"temperature":0'
chat_on() {
  req POST "$U/v1/chat/completions" -d "{$CHAT_REQ,\"llamay_session\":\"$1\"}"
  js '.choices[0].message.content + "\t" + (.usage.llamay_cached_prompt_tokens | tostring)'
}
CW=$(chat_on "$CHAT")
CACHED=$(cut -f2 <<<"$CW")
[ "$CACHED" -ge $((CHAT_TOKENS - 1)) ] && pass "chat session: $CACHED cached prompt tokens (context $CHAT_TOKENS)" || fail "chat session: $CACHED cached prompt tokens, context holds $CHAT_TOKENS"
for b in $CB; do expect_eq "chat branch $b = parent" "$(chat_on "$b")" "$CW"; done

# --- delete everything; a second delete is a 404 ---------------------------------------------------------
for id in $PARENT $BRANCHES $CHAT $CB; do
  req DELETE "$U/v1/contexts/$id"
  [ "$STATUS" = 200 ] || fail "delete $id -> $STATUS"
done
req DELETE "$U/v1/contexts/$PARENT"
expect_eq "delete twice: 404" "$STATUS" 404
req GET "$U/v1/contexts"
expect_eq "nothing held afterwards" "$(js '.data | length')" 0
req GET "$U/health"
expect_eq "still healthy" "$STATUS" 200

echo "$((checks - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
