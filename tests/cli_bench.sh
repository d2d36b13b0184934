#!/usr/bin/env bash
# `llamay bench`: each test runs on its own (a tg test without a pp test used to divide by zero), and
# out-of-range counts are user errors (exit 2), not crashes; LLAMAY_ISA selects the kernels' level.
# Usage: cli_bench.sh LLAMAY_BINARY SHARED_DIR. Exit 77 (skipped) when stories260K is absent.
set -euo pipefail
bin=$1
model=$2/ref/models/stories260K.gguf
[ -f "$model" ] || { echo "skipped: $model is absent"; exit 77; }
out=$("$bin" bench -m "$model" -p 0 -n 4 -r 1 2>/dev/null)
grep -q '| *tg4 |' <<<"$out" || { echo "no tg4 row without a pp test:"; echo "$out"; exit 1; }
# A tg row carries the decode memory bound: MiB of weights per token, the GB/s that implies and its fraction of
# the read bandwidth measured at start (printed below the table).
grep -Eq '\| *tg4 \| *[0-9.]+ \([0-9.-]+\) \| *[0-9]+\.[0-9]+ \| *[0-9]+\.[0-9]+ \| *[0-9]+\.[0-9]+ \|$' <<<"$out" ||
  { echo "tg4 row without MiB/token, GB/s and fraction of bandwidth:"; echo "$out"; exit 1; }
grep -Eq '^read bandwidth: [0-9.]+ GB/s' <<<"$out" || { echo "no measured read bandwidth:"; echo "$out"; exit 1; }
out=$("$bin" bench -m "$model" -p 16 -n 0 -r 1 2>/dev/null)
grep -q '| *pp16 |' <<<"$out" || { echo "no pp16 row:"; echo "$out"; exit 1; }
if grep -q 'tg' <<<"$(grep -v '| test |' <<<"$out" | grep -v -- '---')"; then echo "a tg row with -n 0"; exit 1; fi
# -d: the tests start from a context of that many tokens, and say so; -m reports the load against a read
# of the file from the page cache.
all=$("$bin" bench -m "$model" -p 8 -n 4 -d 70 -r 1 2>&1)
grep -q '| *pp8 @ d70 |' <<<"$all" || { echo "no pp8 @ d70 row:"; echo "$all"; exit 1; }
grep -q '| *tg4 @ d70 |' <<<"$all" || { echo "no tg4 @ d70 row:"; echo "$all"; exit 1; }
grep -Eq '^load: .*; reading the file from the page cache: .* \(load / read [0-9.]+\)$' <<<"$all" ||
  { echo "no load line:"; echo "$all"; exit 1; }
for args in "-r 0" "-p -1" "-n -5" "-t -1" "-d -3"; do
  set +e
  # shellcheck disable=SC2086
  "$bin" bench -m "$model" $args >/dev/null 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "bench $args: exit $rc, want 2"; exit 1; }
done
# A synthetic model's --arch is llama or granitehybrid; anything else is a user error, found before building.
set +e
"$bin" bench --synthetic q8_0 --arch bogus -p 8 -n 0 -r 1 >/dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "bench --arch bogus: exit $rc, want 2"; exit 1; }
# LLAMAY_ISA caps the kernels' level and the run says which level it used; a bad value is reported and ignored.
err=$(LLAMAY_ISA=scalar "$bin" bench -m "$model" -p 8 -n 0 -r 1 2>&1 >/dev/null)
grep -q 'scalar kernels' <<<"$err" || { echo "LLAMAY_ISA=scalar not applied: $err"; exit 1; }
err=$(LLAMAY_ISA=bogus "$bin" bench -m "$model" -p 8 -n 0 -r 1 2>&1 >/dev/null)
grep -q 'ignoring LLAMAY_ISA=bogus' <<<"$err" || { echo "bad LLAMAY_ISA not reported: $err"; exit 1; }
grep -Eq '(scalar|avx2|avx512) kernels' <<<"$err" || { echo "no kernel level reported: $err"; exit 1; }
echo "llamay bench ok"
