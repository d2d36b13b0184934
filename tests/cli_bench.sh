#!/usr/bin/env bash
# `llamay bench`: each test runs on its own (a tg test without a pp test used to divide by zero), and
# out-of-range counts are user errors (exit 2), not crashes.
# Usage: cli_bench.sh LLAMAY_BINARY SHARED_DIR. Exit 77 (skipped) when stories260K is absent.
set -euo pipefail
bin=$1
model=$2/ref/models/stories260K.gguf
[ -f "$model" ] || { echo "skipped: $model is absent"; exit 77; }
out=$("$bin" bench -m "$model" -p 0 -n 4 -r 1 2>/dev/null)
grep -q '| *tg4 |' <<<"$out" || { echo "no tg4 row without a pp test:"; echo "$out"; exit 1; }
out=$("$bin" bench -m "$model" -p 16 -n 0 -r 1 2>/dev/null)
grep -q '| *pp16 |' <<<"$out" || { echo "no pp16 row:"; echo "$out"; exit 1; }
if grep -q 'tg' <<<"$(grep -v '| test |' <<<"$out" | grep -v -- '---')"; then echo "a tg row with -n 0"; exit 1; fi
for args in "-r 0" "-p -1" "-n -5" "-t -1"; do
  set +e
  # shellcheck disable=SC2086
  "$bin" bench -m "$model" $args >/dev/null 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "bench $args: exit $rc, want 2"; exit 1; }
done
echo "llamay bench ok"
