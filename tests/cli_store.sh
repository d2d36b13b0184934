#!/usr/bin/env bash
# `llamay ctx push | pull | ls` against a directory store: a pushed file comes back byte for byte, a second
# push of the same file sends no chunk, a damaged chunk is refused on pull (and nothing is written), bad
# names are the user's error.
# Usage: cli_store.sh LLAMAY_BINARY
set -euo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
prompt=$(printf 'a long system prompt for the store test %.0s' $(seq 1 60))
"$bin" ctx build -p "$prompt" -o "$dir/base.llamayctx" >/dev/null
out=$("$bin" ctx push --store "$dir/store" -i "$dir/base.llamayctx" --json)
sent=$(jq .chunks_sent <<<"$out"); chunks=$(jq .chunks <<<"$out")
[ "$sent" -eq "$chunks" ] && [ "$chunks" -ge 2 ] || { echo "first push: $out"; exit 1; }
again=$("$bin" ctx push --store "$dir/store" -i "$dir/base.llamayctx" --json)
[ "$(jq .chunks_sent <<<"$again")" -eq 0 ] || { echo "second push sent chunks: $again"; exit 1; }
"$bin" ctx ls --store "$dir/store" | grep -q '^base ' || { echo "ls does not show base"; exit 1; }
"$bin" ctx pull --store "$dir/store" --name base -o "$dir/back.llamayctx" >/dev/null
cmp -s "$dir/base.llamayctx" "$dir/back.llamayctx" || { echo "pulled bytes differ"; exit 1; }
# A damaged chunk: refused, nothing written.
chunk=$(find "$dir/store" -path '*chunks*' -type f | head -1)
printf 'X' | dd of="$chunk" bs=1 seek=100 conv=notrunc status=none
set +e
"$bin" ctx pull --store "$dir/store" --name base -o "$dir/damaged.llamayctx" >/dev/null 2>"$dir/err"
rc=$?
set -e
[ "$rc" -eq 1 ] || { echo "pull of a damaged chunk: exit $rc, want 1"; cat "$dir/err"; exit 1; }
grep -q "damaged" "$dir/err" || { echo "no 'damaged' in: $(cat "$dir/err")"; exit 1; }
[ ! -e "$dir/damaged.llamayctx" ] || { echo "a damaged pull wrote a file"; exit 1; }
for args in "--name ../x" "--name missing"; do
  set +e
  # shellcheck disable=SC2086
  "$bin" ctx pull --store "$dir/store" $args -o "$dir/x.llamayctx" >/dev/null 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "pull $args: exit $rc, want 2"; exit 1; }
done
set +e
"$bin" ctx push --store "$dir/store" -i "$dir/base.llamayctx" --name "a b" >/dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "push with a bad name: exit $rc, want 2"; exit 1; }
echo "llamay ctx push/pull/ls ok"
