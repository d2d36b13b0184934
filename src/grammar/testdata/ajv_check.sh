#!/usr/bin/env bash
# ctest grammar_ajv: generates constrained outputs with random models (grammar_test's GrammarProperty) and
# validates every one against its schema with ajv (validate_ajv.mjs). Skips (77) where node or the npm
# packages (scripts/setup installs them in tests/e2e) are missing.
# usage: ajv_check.sh GRAMMAR_TEST_BINARY E2E_DIR
set -euo pipefail
test_bin=$1
e2e=$2
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null 2>&1; then
  echo "grammar_ajv: node is not installed: skipped"
  exit 77
fi
if [ ! -d "$e2e/node_modules/ajv" ] || [ ! -d "$e2e/node_modules/ajv-formats" ]; then
  echo "grammar_ajv: ajv is not installed in $e2e/node_modules (run scripts/setup): skipped"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LLAMAY_GRAMMAR_DUMP="$tmp/outputs.json" "$test_bin" --gtest_filter='GrammarProperty.*' --gtest_brief=1
node "$here/validate_ajv.mjs" "$e2e" "$tmp/outputs.json" "$here/schemas"
