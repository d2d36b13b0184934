# shellcheck shell=bash
# The S3 test store for the bash tests (sourced after lib.sh): npm s3rver behind the fault proxy of
# lib/s3_fault_server.mjs, which takes commands (hold, fail, cut requests; reset) as JSON lines on fd 7.
#   require_s3      exits 77 (skipped) without node or tests/e2e/node_modules/s3rver
#   start_s3 N      starts it (N numbers the start: a restart keeps its objects in $T/s3data and the proxy
#                   port of the first start); sets S3_PID and PROXY, exports the AWS variables llamay reads
#                   and STORE (s3://llamay-e2e/e2e)
#   kill_s3         kill -9, as a store that stops answering
#   s3cmd JSON      one command to the proxy
# Every store started here is stopped when the sourcing script exits (with the servers of lib.sh).
# Needs: T (a scratch folder) and `here` (tests/e2e).

S3_PID="" PROXY=""
S3_SECRET=e2e-secret-$RANDOM$RANDOM

require_s3() {
  command -v node >/dev/null || { echo "skipped: node is not installed"; exit 77; }
  [ -d "$here/node_modules/s3rver" ] || { echo "skipped: tests/e2e/node_modules lacks s3rver (run scripts/setup)"; exit 77; }
}

start_s3() {
  mkdir -p "$T/s3data"
  mkfifo "$T/s3.in$1"
  node "$here/lib/s3_fault_server.mjs" --access-key E2EKEY --secret-key "$S3_SECRET" --bucket llamay-e2e \
    --data-dir "$T/s3data" ${PROXY:+--port "$PROXY"} <"$T/s3.in$1" >"$T/s3.out$1" 2>"$T/s3.err$1" &
  S3_PID=$!
  exec 7>"$T/s3.in$1"  # held open: the server exits when it closes
  for _ in $(seq 300); do grep -q READY "$T/s3.out$1" && break; sleep 0.1; done
  PROXY=$(sed -n 's/.*proxy=\([0-9]*\).*/\1/p' "$T/s3.out$1")
  [ -n "$PROXY" ] || { echo "s3rver did not start:"; cat "$T/s3.err$1"; exit 1; }
  export AWS_ACCESS_KEY_ID=E2EKEY AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_REGION=us-east-1
  export AWS_ENDPOINT_URL_S3=http://127.0.0.1:$PROXY
  STORE=s3://llamay-e2e/e2e
}

kill_s3() {
  kill -KILL "$S3_PID"
  wait "$S3_PID" 2>/dev/null || true
  exec 7>&-
  S3_PID=""
}

s3cmd() { echo "$1" >&7; sleep 0.2; }

stop_s3_and_servers() {
  exec 7>&- || true
  if [ -n "$S3_PID" ]; then kill "$S3_PID" 2>/dev/null || true; fi
  stop_all_servers
}
trap stop_s3_and_servers EXIT
