#!/usr/bin/env bash
# `llamay ctx build -> fork -> restore` end to end, on the built-in demo model and (when present) on
# ../shared/ref/models/tiny-llama-f32.gguf and two hybrid models (tiny-granitehybrid, tiny-mamba2). Checks the fork table and its measured "pages allocated 0",
# --json, the exit codes (2 missing/truncated/corrupt/malformed input, 3 another model's snapshot), and
# exactness: a restored context continues exactly as `llamay run` does on the whole prompt, whatever the
# page size it is restored into, and a forked branch continues exactly as its source.
# Usage: cli_ctx.sh LLAMAY_BINARY SHARED_DIR
set -euo pipefail
bin=$1
shared=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect_rc WANT CMD...: runs CMD (stdout to $tmp/out, stderr to $tmp/err) and checks its exit status.
expect_rc() {
  local want=$1 rc=0
  shift
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "exit $rc, want $want: $*"
    sed 's/^/  stderr: /' "$tmp/err"
  fi
}

# same LABEL GOT WANT
same() {
  if [ "$2" != "$3" ]; then
    fail "$1"
    echo "  got:  $(printf %q "$2")"
    echo "  want: $(printf %q "$3")"
  fi
}

json_get() {  # json_get FILE PYTHON_EXPR_ON_j
  python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# check_model LABEL PROMPT SUFFIX [-m MODEL]: the whole chain on one model.
check_model() {
  local label=$1 prompt=$2 suffix=$3
  shift 3
  local -a m=("$@")
  local d=$tmp/$label
  mkdir -p "$d"
  echo "== $label"

  # build: table, --json, and no progress bar when stderr is not a terminal.
  expect_rc 0 "$bin" ctx build "${m[@]}" -p "$prompt" -o "$d/base.llamayctx"
  grep -q '^tokens  ' "$tmp/out" || fail "$label: build table has no tokens line"
  grep -q '^file size  ' "$tmp/out" || fail "$label: build table has no file size line"
  grep -q '^prefill  .*tokens/s' "$tmp/out" || fail "$label: build table has no prefill line"
  if grep -q 'prefill \[' "$tmp/err"; then fail "$label: progress bar drawn on a non-terminal"; fi
  [ -s "$d/base.llamayctx" ] || fail "$label: no snapshot written"
  expect_rc 0 "$bin" ctx build "${m[@]}" -p "$prompt" -o "$d/base2.llamayctx" --json
  cp "$tmp/out" "$d/build.json"
  local tokens pages
  tokens=$(json_get "$d/build.json" 'j["tokens"]') || fail "$label: build --json does not parse"
  pages=$(json_get "$d/build.json" 'j["pages"]')
  cmp -s "$d/base.llamayctx" "$d/base2.llamayctx" || fail "$label: two builds of one prompt differ"

  # fork: the seed's five lines, pages allocated 0, one file per branch.
  expect_rc 0 "$bin" ctx fork "${m[@]}" -i "$d/base.llamayctx" -n 4 -o "$d/branches"
  local table
  table=$(cat "$tmp/out")
  [ "$(wc -l <"$tmp/out")" -eq 5 ] || fail "$label: fork table is not 5 lines"
  same "$label: fork line 1" "$(sed -n 1p <<<"$table")" \
    "$(printf '%-25s %s' source "$d/base.llamayctx, $tokens tokens, $pages pages")"
  [[ "$(sed -n 2p <<<"$table")" =~ ^branches\ {18}4\ in\ [0-9.]+(µs|\ ms|\ s)\ \([0-9.]+(µs|\ ms|\ s)\ each\)$ ]] ||
    fail "$label: fork line 2: $(sed -n 2p <<<"$table")"
  same "$label: fork line 3" "$(sed -n 3p <<<"$table")" "pages allocated           0"
  same "$label: fork line 4" "$(sed -n 4p <<<"$table")" "pages a copy would need   $((pages * 4))"
  [[ "$(sed -n 5p <<<"$table")" =~ ^memory\ held\ {15}[0-9.]+\ [KMG]iB\ \(a\ copy\ would\ be\ [0-9.]+\ [KMG]iB\)$ ]] ||
    fail "$label: fork line 5: $(sed -n 5p <<<"$table")"
  for k in 1 2 3 4; do [ -s "$d/branches/branch-$k.llamayctx" ] || fail "$label: branch-$k missing"; done
  expect_rc 0 "$bin" ctx fork "${m[@]}" -i "$d/base.llamayctx" -n 3 -o "$d/branches-json" --json
  same "$label: fork --json" \
    "$(json_get "$tmp/out" '(j["branches"], j["pages_allocated"], j["pages_live_after"] - j["pages_live_before"],
                             len(j["branch_files"]), j["tokens"])')" \
    "(3, 0, 0, 3, $tokens)"

  # restore: page size, fork and --json change nothing.
  local cont r128 rbranch
  expect_rc 0 "$bin" ctx restore "${m[@]}" -i "$d/base.llamayctx" -p "$suffix" -n 16 --temp 0
  cont=$(cat "$tmp/out")
  grep -q '^restore: .* reused, .* prefilled' "$tmp/err" || fail "$label: restore prints no stats line"
  [ -n "$cont" ] || fail "$label: restore generated nothing"
  expect_rc 0 "$bin" ctx restore "${m[@]}" -i "$d/base.llamayctx" -p "$suffix" -n 16 --temp 0 --page-tokens 128
  same "$label: restore into 128-token pages" "$(cat "$tmp/out")" "$cont"
  expect_rc 0 "$bin" ctx restore "${m[@]}" -i "$d/base.llamayctx" -p "$suffix" -n 16 --temp 0 --page-tokens 7
  same "$label: restore into 7-token pages" "$(cat "$tmp/out")" "$cont"
  expect_rc 0 "$bin" ctx restore "${m[@]}" -i "$d/branches/branch-3.llamayctx" -p "$suffix" -n 16 --temp 0
  same "$label: restore of a branch" "$(cat "$tmp/out")" "$cont"
  expect_rc 0 "$bin" ctx restore "${m[@]}" -i "$d/base.llamayctx" -p "$suffix" -n 16 --temp 0 --json
  cp "$tmp/out" "$d/restore.json"
  same "$label: restore --json counts" \
    "$(json_get "$d/restore.json" '(j["tokens_restored"], j["tokens_reused"],
                                    len(j["token_ids"]) == j["tokens_generated"])')" \
    "($tokens, $tokens, True)"
  if iconv -f UTF-8 -t UTF-8 <<<"$cont" >/dev/null 2>&1; then  # else the JSON text is lossy (U+FFFD)
    same "$label: restore --json text" "$(json_get "$d/restore.json" 'j["text"]')" "$cont"
  fi
  expect_rc 0 "$bin" ctx restore "${m[@]}" -i "$d/branches/branch-2.llamayctx" -p "$suffix" -n 16 --temp 0 --json \
    --page-tokens 128
  same "$label: restore --json token ids of a branch in 128-token pages" \
    "$(json_get "$tmp/out" 'j["token_ids"]')" "$(json_get "$d/restore.json" 'j["token_ids"]')"

  # Exactness against `llamay run` on the joint prompt (prefilled in chunks of 100, not build's 256),
  # where tokenising the prompt and the suffix apart gives the joint prompt's tokens.
  local joint apart
  joint=$("$bin" tokenize "${m[@]}" -p "$prompt $suffix")
  apart=$(python3 -c 'import json, sys
print(json.dumps(json.loads(sys.argv[1]) + json.loads(sys.argv[2]), separators=(",", ":")))' \
    "$("$bin" tokenize "${m[@]}" -p "$prompt")" "$("$bin" tokenize "${m[@]}" --no-bos -p "$suffix")")
  if [ "$joint" = "$apart" ]; then
    expect_rc 0 "$bin" run "${m[@]}" -p "$prompt $suffix" -n 16 --temp 0 -b 100
    same "$label: restore -p vs run on the joint prompt" "$(cat "$tmp/out")" "$prompt $suffix$cont"
    expect_rc 0 "$bin" run "${m[@]}" -p "$prompt $suffix" -n 16 --temp 0.9 --seed 7
    local sampled=$(cat "$tmp/out")
    expect_rc 0 "$bin" ctx restore "${m[@]}" -i "$d/base.llamayctx" -p "$suffix" -n 16 --temp 0.9 --seed 7
    same "$label: sampled restore vs run (seed 7)" "$prompt $suffix$(cat "$tmp/out")" "$sampled"
  elif [ "$label" = demo ]; then
    fail "demo: byte vocabulary tokenised the suffix differently apart ($apart) and joint ($joint)"
  else
    echo "  (tokenisations differ apart and joint: run comparison skipped)"
  fi
  # No -p: the last stored position is recomputed, exactly.
  expect_rc 0 "$bin" run "${m[@]}" -p "$prompt" -n 16 --temp 0
  local plain=$(cat "$tmp/out")
  expect_rc 0 "$bin" ctx restore "${m[@]}" -i "$d/base.llamayctx" -n 16 --temp 0
  same "$label: restore without -p vs run" "$prompt$(cat "$tmp/out")" "$plain"
  expect_rc 0 "$bin" ctx restore "${m[@]}" -i "$d/branches/branch-1.llamayctx" -n 16 --temp 0 --page-tokens 32
  same "$label: branch restore without -p vs run" "$prompt$(cat "$tmp/out")" "$plain"

  # Damaged input: exit 2.
  local size
  size=$(stat -c %s "$d/base.llamayctx")
  head -c $((size / 2)) "$d/base.llamayctx" >"$d/truncated.llamayctx"
  expect_rc 2 "$bin" ctx restore "${m[@]}" -i "$d/truncated.llamayctx" -n 1
  grep -q truncated "$tmp/err" || fail "$label: truncation not named"
  expect_rc 2 "$bin" ctx fork "${m[@]}" -i "$d/truncated.llamayctx" -n 2 -o "$d/x"
  cp "$d/base.llamayctx" "$d/corrupt.llamayctx"
  python3 -c 'import sys
f = open(sys.argv[1], "r+b"); f.seek(-40, 2); b = f.read(1); f.seek(-40, 2); f.write(bytes([b[0] ^ 1]))' \
    "$d/corrupt.llamayctx"
  expect_rc 2 "$bin" ctx restore "${m[@]}" -i "$d/corrupt.llamayctx" -n 1
  grep -q checksum "$tmp/err" || fail "$label: checksum mismatch not named"
  expect_rc 2 "$bin" ctx restore "${m[@]}" -i "$d/missing.llamayctx" -n 1
  expect_rc 2 "$bin" ctx fork "${m[@]}" -i "$d/missing.llamayctx" -n 2 -o "$d/x"
}

# Over 256 bytes, so build prefills in two chunks and run (-b 100) in three.
demo_prompt="The quick brown fox jumps over the lazy dog; $(printf 'pack my box with five dozen liquor jugs %.0s' {1..7})"
check_model demo "$demo_prompt" "and then"

# Another model's snapshot without a second model: the demo snapshot with another weight digest (header
# bytes 48..80, docs/snapshot-format.md) and its CRC32C recomputed, so only the digest is wrong.
python3 - "$tmp/demo/base.llamayctx" "$tmp/other-weights.llamayctx" <<'PY'
import sys
def crc32c(data):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
assert crc32c(b"123456789") == 0xE3069283
body = bytearray(open(sys.argv[1], "rb").read()[:-4])
assert crc32c(body) == int.from_bytes(open(sys.argv[1], "rb").read()[-4:], "little"), "CRC layout changed"
body[48:80] = bytes(b ^ 0xFF for b in body[48:80])
open(sys.argv[2], "wb").write(body + crc32c(body).to_bytes(4, "little"))
PY
expect_rc 3 "$bin" ctx restore -i "$tmp/other-weights.llamayctx" -n 1
grep -q wrong_model "$tmp/err" || fail "wrong model not named"
expect_rc 3 "$bin" ctx fork -i "$tmp/other-weights.llamayctx" -n 2 -o "$tmp/x"

tiny=$shared/ref/models/tiny-llama-f32.gguf
if [ -f "$tiny" ]; then
  check_model tiny-llama "Once upon a time, there was a little girl named Lily. She loved to play outside in the park \
with her friends every day" "One day" -m "$tiny"
  # Another model's snapshot: its own exit code (3) and message, from restore and fork alike.
  expect_rc 3 "$bin" ctx restore -m "$tiny" -i "$tmp/demo/base.llamayctx" -n 1
  grep -q wrong_model "$tmp/err" || fail "wrong model not named"
  expect_rc 3 "$bin" ctx fork -m "$tiny" -i "$tmp/demo/base.llamayctx" -n 2 -o "$tmp/x"
  expect_rc 3 "$bin" ctx restore -i "$tmp/tiny-llama/base.llamayctx" -n 1
else
  echo "skipped the tiny-llama part: $tiny is absent"
fi

# Hybrid models (snapshot format version 2: a recurrent state, logits stored by build): the same checks.
for hybrid in tiny-granitehybrid-f32 tiny-mamba2-f32; do
  if [ -f "$shared/ref/models/$hybrid.gguf" ]; then
    check_model "$hybrid" "Once upon a time, there was a little girl named Lily. She loved to play outside in the \
park with her friends every day" "One day" -m "$shared/ref/models/$hybrid.gguf"
    expect_rc 0 "$bin" ctx inspect "$tmp/$hybrid/base.llamayctx"
    grep -q '^format version  *2$' "$tmp/out" || fail "$hybrid: snapshot is not format version 2"
    grep -q '^recurrent state  *after [0-9]* positions' "$tmp/out" || fail "$hybrid: inspect shows no recurrent state"
    grep -q '^next-token logits  *[0-9]* stored' "$tmp/out" || fail "$hybrid: inspect shows no stored logits"
  else
    echo "skipped the $hybrid part: it is absent"
  fi
done

# Bad arguments and malformed models: exit 2.
expect_rc 2 "$bin" ctx restore -m "$tmp/demo/base.llamayctx" -i "$tmp/demo/base.llamayctx" -n 1
expect_rc 2 "$bin" ctx build -m /nonexistent.gguf -p x -o "$tmp/y.llamayctx"
expect_rc 2 "$bin" ctx build -p x
expect_rc 2 "$bin" ctx fork -i "$tmp/demo/base.llamayctx" -n 0 -o "$tmp/z"
expect_rc 2 "$bin" ctx build -p x -o "$tmp/y.llamayctx" --kv-precision f8
"$bin" --help | grep -q '3 a snapshot from another model' || fail "--help does not document exit code 3"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "ctx build/fork/restore: all checks passed"
