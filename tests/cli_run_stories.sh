#!/usr/bin/env bash
# `llamay run` on stories260K prints llama.cpp's reference story (../shared/ref/README.md).
# Usage: cli_run_stories.sh LLAMAY_BINARY SHARED_DIR. Exit 77 (skipped) when the reference is absent.
set -euo pipefail
bin=$1
model=$2/ref/models/stories260K.gguf
[ -f "$model" ] || { echo "skipped: $model is absent"; exit 77; }
want='Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball.'
got=$("$bin" run -m "$model" -p "Once upon a time" -n 40 --temp 0 2>/dev/null)
if [ "${got:0:${#want}}" != "$want" ]; then
  echo "got:  $got"
  echo "want: $want"
  exit 1
fi
echo "stories260K story reproduced"
# A missing model file is a user error (exit 2) with a message, not a crash.
set +e
"$bin" run -m /nonexistent.gguf -p x >/dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "missing model: exit $rc, want 2"; exit 1; }
