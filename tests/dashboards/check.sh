#!/usr/bin/env bash
# Checks dashboards/llamay.json against a real llamay: starts `llamay serve` (the built-in demo model) on a
# free loopback port, runs `promtool check metrics` on a scrape of /metrics, starts a Prometheus of its own
# (temporary config and storage, loopback only, 1 s scrape interval) that scrapes that llamay, drives a
# little traffic (chat completions, a completion of 4 tokens, /v1/contexts create, fork, snapshot, restore,
# delete, a 404) that gives every series the dashboard reads a sample (the latency histograms, the fork,
# snapshot and restore counters, errors by status), waits until Prometheus has scraped it, then runs every
# query of the dashboard (every target's expr, Grafana's variables replaced) through Prometheus's
# /api/v1/query. It fails when a query errors or returns no series, when a latency percentile is not a
# number, when the dashboard names a metric the scrape lacks, or when a panel does not use the data source
# variable. Every process it starts is stopped on exit.
#
# Usage: check.sh [LLAMAY_BINARY]   (default: $LLAMAY_BIN, else build/release/bin/llamay)
# Env:   PROMETHEUS, PROMTOOL (default: from PATH); DASHBOARD (default: dashboards/llamay.json);
#        CHECK_KEEP_TMP=1 keeps the scratch folder.
# Exit:  0 ok; 1 a check failed; 77 (skipped) when prometheus or promtool is not installed
#        (Debian's `prometheus` package has both; scripts/setup installs it).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dashboard=${DASHBOARD:-$root/dashboards/llamay.json}
LLAMAY_BIN=${1:-${LLAMAY_BIN:-$root/build/release/bin/llamay}}
PROMETHEUS=${PROMETHEUS:-prometheus}
PROMTOOL=${PROMTOOL:-promtool}
export LLAMAY_BIN

if ! command -v "$PROMETHEUS" >/dev/null 2>&1 || ! command -v "$PROMTOOL" >/dev/null 2>&1; then
  echo "skipped: prometheus and promtool are needed (Debian package 'prometheus'; scripts/setup installs it)"
  exit 77
fi
for tool in curl jq python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "FAIL: $tool is not installed (scripts/setup installs it)" >&2; exit 1; }
done
[ -x "$LLAMAY_BIN" ] || { echo "FAIL: no llamay binary at $LLAMAY_BIN (build it first)" >&2; exit 1; }
[ -f "$dashboard" ] || { echo "FAIL: no dashboard at $dashboard" >&2; exit 1; }

LLAMAY_E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/llamay-dashboards.XXXXXX")
export LLAMAY_E2E_TMP
# shellcheck source=tests/e2e/lib.sh
source "$root/tests/e2e/lib.sh"

prom_pid=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$prom_pid" ] && kill -0 "$prom_pid" 2>/dev/null; then
    kill -TERM "$prom_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$prom_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$prom_pid" 2>/dev/null || true
    wait "$prom_pid" 2>/dev/null || true
  fi
  stop_all_servers
  if [ "${CHECK_KEEP_TMP:-0}" = 1 ]; then echo "kept $LLAMAY_E2E_TMP"; else rm -rf "$LLAMAY_E2E_TMP"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

fail() { echo "FAIL: $*" >&2; exit 1; }
start=$SECONDS

# --- The dashboard's own shape: valid JSON, panels with ids, every query on the data source variable. ---
jq -e . "$dashboard" >/dev/null || fail "$dashboard is not valid JSON"
[ "$(jq '[.templating.list[] | select(.type == "datasource" and .name == "DS_PROMETHEUS")] | length' "$dashboard")" = 1 ] \
  || fail "the dashboard has no datasource variable DS_PROMETHEUS"
dups=$(jq -r '[.. | objects | select(has("gridPos")) | .id] | group_by(.) | map(select(length > 1) | .[0]) | .[]' "$dashboard")
[ -z "$dups" ] || fail "panel ids used twice: $dups"
bad_ds=$(jq -r '.. | objects | select(has("expr") or (has("targets") and .type != "row"))
                | select((.datasource.uid // "") != "${DS_PROMETHEUS}") | (.title // .expr // .refId)' "$dashboard")
[ -z "$bad_ds" ] || fail "panels or targets not on the \${DS_PROMETHEUS} data source: $bad_ds"
mapfile -t exprs < <(jq -r '[.. | objects | select(has("expr")) | .expr] | unique | .[]' "$dashboard")
[ "${#exprs[@]}" -ge 10 ] || fail "only ${#exprs[@]} queries found in the dashboard (jq path wrong?)"
no_targets=$(jq -r '.. | objects | select(has("gridPos") and .type != "row" and .type != "text")
                    | select(((.targets // []) | length) == 0) | .title' "$dashboard")
[ -z "$no_targets" ] || fail "panels without queries: $no_targets"

# --- llamay, and promtool on a real scrape. ---
start_server main
llamay_url=$SERVER_URL
llamay_addr=${llamay_url#http://}
echo "llamay on $llamay_url (pid $SERVER_PID)"

scrape=$LLAMAY_E2E_TMP/scrape.txt
curl -fsS --max-time 5 "$llamay_url/metrics" -o "$scrape" || fail "GET /metrics failed"
set +e
lint=$("$PROMTOOL" check metrics <"$scrape" 2>&1)
lint_rc=$?
set -e
if [ "$lint_rc" -ne 0 ] || [ -n "$lint" ]; then
  echo "$lint" >&2
  fail "promtool check metrics reported problems (exit $lint_rc) on the /metrics scrape"
fi
echo "promtool check metrics: ok ($(grep -c '^# TYPE' "$scrape") metrics)"

# Every metric the dashboard names is in the scrape, so a renamed metric fails here by name.
mapfile -t used < <(printf '%s\n' "${exprs[@]}" | grep -o 'llamay_[a-z0-9_]*' | sort -u)
for m in "${used[@]}"; do
  grep -q "^# TYPE $m " "$scrape" && continue
  # A histogram's series: NAME_bucket, NAME_sum and NAME_count of "# TYPE NAME histogram".
  base=$(sed -E 's/_(bucket|sum|count)$//' <<<"$m")
  [ "$base" != "$m" ] && grep -q "^# TYPE $base histogram$" "$scrape" && continue
  fail "the dashboard uses $m, which /metrics does not export"
done

# --- Prometheus on a free loopback port, scraping llamay every second. ---
cat >"$LLAMAY_E2E_TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: llamay
    static_configs:
      - targets: ['$llamay_addr']
EOF
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
prom_url=""
for attempt in 1 2 3; do  # a port found free may be taken before Prometheus binds it: try another
  port=$(free_port)
  rm -rf "$LLAMAY_E2E_TMP/tsdb"
  "$PROMETHEUS" --config.file="$LLAMAY_E2E_TMP/prometheus.yml" --storage.tsdb.path="$LLAMAY_E2E_TMP/tsdb" \
    --web.listen-address="127.0.0.1:$port" --log.level=warn >"$LLAMAY_E2E_TMP/prometheus.log" 2>&1 &
  prom_pid=$!
  for _ in $(seq 100); do
    if curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$port/-/ready" 2>/dev/null; then
      prom_url=http://127.0.0.1:$port
      break
    fi
    kill -0 "$prom_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$prom_url" ] && break
  kill -KILL "$prom_pid" 2>/dev/null || true
  wait "$prom_pid" 2>/dev/null || true
  prom_pid=""
  echo "prometheus did not start on port $port (attempt $attempt); its log:" >&2
  cat "$LLAMAY_E2E_TMP/prometheus.log" >&2
done
[ -n "$prom_url" ] || fail "prometheus did not start"
echo "prometheus on $prom_url (pid $prom_pid)"

# query EXPR: prints Prometheus's JSON answer of an instant query at now.
query() { curl -sS --max-time 5 "$prom_url/api/v1/query" --data-urlencode "query=$1"; }
# wait_for EXPR WHAT: waits up to 10 s until EXPR returns a series.
wait_for() {
  for _ in $(seq 100); do
    [ "$(query "$1" | jq '.data.result | length' 2>/dev/null || echo 0)" -gt 0 ] && return 0
    sleep 0.1
  done
  echo "prometheus log:" >&2; cat "$LLAMAY_E2E_TMP/prometheus.log" >&2
  fail "$2 (waited 10 s for: $1)"
}
wait_for 'up{job="llamay"} == 1' "prometheus did not scrape llamay"

# --- A little traffic, after the first scrape so that the counters' increases are in the TSDB. ---
post() { curl -fsS --max-time 30 -H 'Content-Type: application/json' "$@"; }
chat='{"messages":[{"role":"system","content":"You are a terse assistant for the dashboard check."},{"role":"user","content":"hi"}],"max_tokens":8}'
post "$llamay_url/v1/chat/completions" -d "$chat" >/dev/null
post "$llamay_url/v1/chat/completions" -d "$chat" >/dev/null  # the same prompt again: a prefix hit
# 4 tokens whatever the sampling: a time per output token for certain.
post "$llamay_url/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":4,"ignore_eos":true}' \
  >/dev/null
ctx=$(post "$llamay_url/v1/contexts" -d '{"prompt":"A system prompt that the dashboard check forks and restores."}' | jq -r .id)
post -X POST "$llamay_url/v1/contexts/$ctx/fork?n=2" >/dev/null
curl -fsS --max-time 30 "$llamay_url/v1/contexts/$ctx/snapshot" -o "$LLAMAY_E2E_TMP/ctx.llamayctx"
restored=$(curl -fsS --max-time 30 -X POST "$llamay_url/v1/contexts/restore" \
  --data-binary @"$LLAMAY_E2E_TMP/ctx.llamayctx" | jq -r .id)
post "$llamay_url/v1/chat/completions" \
  -d "{\"messages\":[{\"role\":\"user\",\"content\":\"go on\"}],\"max_tokens\":8,\"llamay_session\":\"$restored\"}" >/dev/null
curl -fsS --max-time 30 -X DELETE "$llamay_url/v1/contexts/$restored" >/dev/null
code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "$llamay_url/no-such-route")
[ "$code" = 404 ] || fail "GET /no-such-route answered $code, not 404"
after=$(curl -fsS --max-time 5 "$llamay_url/metrics")
tokens=$(sed -n 's/^llamay_completion_tokens_total \([0-9.e+]*\)$/\1/p' <<<"$after")
[ -n "$tokens" ] || fail "no llamay_completion_tokens_total in /metrics"
# The traffic reached the series the dashboard's latency and context panels read.
for series in llamay_time_to_first_token_seconds_count llamay_time_per_output_token_seconds_count \
  llamay_request_duration_seconds_count llamay_context_forks_total llamay_context_snapshots_total \
  llamay_context_restores_total 'llamay_requests_by_status_total{code="404"}'; do
  value=$(awk -v s="$series" '$1 == s { print $2 }' <<<"$after")
  awk -v v="${value:-0}" 'BEGIN { exit !(v > 0) }' || fail "$series is ${value:-absent} after the traffic"
done
echo "traffic: 3 chat completions and a completion, a context ($ctx) forked 2 ways, snapshotted, restored" \
  "($restored) and deleted, a 404"
# Prometheus has the traffic once it scraped the final token count; one more scrape after that.
wait_for "llamay_completion_tokens_total == $tokens" "prometheus did not scrape the traffic"
sleep 1.5
# Errors by status: the 404 shows in rate() (its series was exported, at 0, before it happened).
wait_for 'rate(llamay_requests_by_status_total{code="404"}[1m]) > 0' "the 404 is not in the errors by status"

# --- Every query of the dashboard, Grafana's variables replaced as Grafana would for a 1 s scrape. ---
failed=0
for e in "${exprs[@]}"; do
  q=${e//\$__rate_interval/1m}
  q=${q//\$\{__rate_interval\}/1m}
  q=${q//\$__interval/5s}
  q=${q//\$\{__interval\}/5s}
  q=${q//\$__range/5m}
  q=${q//\$\{__range\}/5m}
  q=${q//\$instance/.*}
  q=${q//\$\{instance\}/.*}
  if [[ $q == *'$'* ]]; then echo "FAIL: a variable the check does not know in: $e" >&2; failed=1; continue; fi
  answer=$(query "$q")
  status=$(jq -r '.status' <<<"$answer" 2>/dev/null || echo "no JSON")
  if [ "$status" != success ]; then
    echo "FAIL: query errors ($(jq -r '.error // empty' <<<"$answer" 2>/dev/null || echo "$answer")): $q" >&2
    failed=1
    continue
  fi
  n=$(jq '.data.result | length' <<<"$answer")
  if [ "$n" -eq 0 ]; then
    echo "FAIL: query returns no series: $q" >&2
    failed=1
    continue
  fi
  value=$(jq -r '.data.result[0].value[1]' <<<"$answer")
  # A percentile of a histogram that saw the traffic is a number (NaN: its buckets did not grow).
  if [[ $q == *histogram_quantile* ]] && [ "$value" = NaN ]; then
    echo "FAIL: query returns NaN: $q" >&2
    failed=1
    continue
  fi
  printf 'ok  %-8s %s\n' "$(cut -c1-8 <<<"$value")" "$q"
done
# The instance variable's values: label_values(llamay_requests_total, instance).
values=$(curl -sS -G --max-time 5 "$prom_url/api/v1/label/instance/values" --data-urlencode 'match[]=llamay_requests_total' |
  jq -r '.data | join(",")')
[ "$values" = "$llamay_addr" ] || { echo "FAIL: label_values(llamay_requests_total, instance) gave '$values'" >&2; failed=1; }
[ "$failed" = 0 ] || fail "some of the dashboard's queries failed (above)"
kill -0 "$SERVER_PID" 2>/dev/null || fail "llamay died during the check"
echo "dashboards/llamay.json: ${#exprs[@]} queries ok against Prometheus in $((SECONDS - start)) s"
