#!/usr/bin/env bash
# Runs the web page's tests: the unit tests of its pure modules (node only), then the browser tests
# (Debian's chromium, driven by playwright-core from tests/web/node_modules; each test starts its own
# `llamay serve` on a free loopback port).
#
# Usage: run.sh unit | browser LLAMAY_BINARY SHARED_DIR [TEST FILES...]
# Exit: node --test's status; 77 (skipped) when node is not installed; 1 with a hint when chromium or
# tests/web/node_modules is missing (scripts/setup installs both).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null 2>&1; then
  echo "skipped: node is not installed (scripts/setup installs it)"
  exit 77
fi
kind=${1:-}
case "$kind" in
  unit) exec node --test "$here"/unit/*.test.mjs ;;
  browser)
    [ $# -ge 3 ] || { echo "usage: $0 browser LLAMAY_BINARY SHARED_DIR [TEST FILES...]" >&2; exit 2; }
    export LLAMAY_BIN=$2 LLAMAY_SHARED=$3
    shift 3
    [ -x "$LLAMAY_BIN" ] || { echo "no llamay binary at $LLAMAY_BIN (build it first)" >&2; exit 1; }
    [ -x "${LLAMAY_CHROMIUM:-/usr/bin/chromium}" ] || { echo "FAIL: no chromium: run scripts/setup" >&2; exit 1; }
    [ -d "$here/node_modules/playwright-core" ] || { echo "FAIL: tests/web/node_modules is missing: run scripts/setup" >&2; exit 1; }
    [ $# -gt 0 ] || set -- "$here"/*.test.mjs
    # One file at a time: each starts servers and a browser, and the machine has two cores.
    exec node --test --test-concurrency=1 "$@" ;;
  *) echo "usage: $0 unit | browser LLAMAY_BINARY SHARED_DIR [TEST FILES...]" >&2; exit 2 ;;
esac
