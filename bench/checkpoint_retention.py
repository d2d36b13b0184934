#!/usr/bin/env python3
"""Checkpoint retention on a hybrid model (issue 23, item 1): ../shared/bench/agent_trace.py against
`llamay serve --checkpoint-retention value` and `last-use`, one after the other on the same file, at each
KV budget given (docs/benchmarks.md, "Checkpoint retention").

The model (default: `llamay model synth --shape hybrid --type q8_0`, Granite 4.0-H's layer mix, its 12
Mamba-2 layers' state 12.4 MiB a sequence) is served with 2 threads. For each budget and policy the script
runs the trace (4 agents, 10 turns, one request at a time) and reports its TTFT (turn 1, which prefills the
system prompt, apart from turns 2-10), the prompt tokens computed and taken from the cache (/metrics), the
prefix tree's evictions, and the bytes of checkpoints and recurrent states (/v1/state's pool.bytes.states,
sampled every 0.2 s: the peak, and at the end). Standard library only.

With --stagger the same texts (agent_trace.py's system prompt, tool calls and results) arrive as agents do
in a service: agent k starts in round k and then takes a turn every round until its --turns are done, so each
round one new conversation needs the shared system prompt while the others add their turns' checkpoints.
agent_trace.py itself runs its agents in lockstep (all first turns together), where every agent's newest
checkpoint is also the most recently used and both policies keep what the next turn needs.

Usage: bench/checkpoint_retention.py [-m MODEL] [--kv-memory 1024,384] [--policies value,last-use] [--stagger]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, threading, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.path.join(ROOT, "..", "shared")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SHARED, "bench"))
import agent_trace  # noqa: E402  (the trace's texts and its streaming client)
from bench_util import free_port  # noqa: E402


def staggered(a, base):
    """Agent k (0-based) starts in round k and takes one turn a round; returns agent_trace-shaped records."""
    class Args:
        seed, system_words, result_words, agents, turns = 7, agent_trace.SYSTEM_WORDS, agent_trace.RESULT_WORDS, a.agents, a.turns
    _, prompts = agent_trace.build_prompts(Args)
    srv = agent_trace.Server(base, 900.0)
    records = []
    for rnd in range(a.agents + a.turns - 1):
        for ag in range(a.agents):
            t = rnd - ag
            if 0 <= t < a.turns:
                status, ttft, *_ = agent_trace.request(srv, "openai", prompts[ag][t], 8, "omit", True, None)
                if status != 200:
                    sys.exit(f"agent {ag + 1} turn {t + 1}: HTTP {status}")
                records.append({"turn": t + 1, "agent": ag + 1, "ttft_ms": ttft * 1000.0})
    return records


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


class StateSampler(threading.Thread):
    """Polls /v1/state for the bytes of recurrent states and checkpoints while the trace runs."""

    def __init__(self, base):
        super().__init__(daemon=True)
        self.base, self.peak, self.done = base, 0, threading.Event()

    def run(self):
        while not self.done.is_set():
            try:
                st = json.loads(get(self.base + "/v1/state"))
                self.peak = max(self.peak, st["pool"]["bytes"]["states"])
            except Exception:
                pass
            time.sleep(0.2)


def run_one(a, model, kv_mib, policy, tmp):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(tmp, f"serve-{kv_mib}-{policy}.log"), "w")
    proc = subprocess.Popen([a.llamay, "serve", "-m", model, "--port", str(port), "-t", str(a.threads),
                             "-c", "65536", "--kv-memory", str(kv_mib), "--checkpoint-retention", policy],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            if proc.poll() is not None:
                sys.exit(f"llamay serve exited early ({proc.returncode}); see {log.name}")
            try:
                get(base + "/health")
                break
            except Exception:
                time.sleep(0.1)
        state_bytes = json.loads(get(base + "/v1/state"))["server"]["kv"].get("state_bytes", 0)
        sampler = StateSampler(base)
        sampler.start()
        out = os.path.join(tmp, f"trace-{kv_mib}-{policy}.json")
        t0 = time.perf_counter()
        if a.stagger:
            recs = staggered(a, base)
        else:
            subprocess.run([sys.executable, os.path.join(SHARED, "bench", "agent_trace.py"), "--base", base,
                            "--api", "openai", "--agents", str(a.agents), "--turns", str(a.turns), "--json", out],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            recs = json.load(open(out))["requests"]
        wall = time.perf_counter() - t0
        sampler.done.set()
        sampler.join()
        m = get(base + "/metrics")
        end_states = json.loads(get(base + "/v1/state"))["pool"]["bytes"]["states"]
        later = [r["ttft_ms"] for r in recs if r["turn"] > 1 and r["ttft_ms"] is not None]
        first = [r["ttft_ms"] for r in recs if r["turn"] == 1 and r["ttft_ms"] is not None]
        # A request that fails after its 200 (a stream that ends in an error: the budget too small for one
        # request's own checkpoints) would pass for a fast one.
        errors = sum(float(l.rsplit(" ", 1)[1]) for l in m.splitlines() if l.startswith("llamay_request_errors_total"))
        if errors:
            sys.exit(f"{kv_mib} MiB {policy}: {errors:.0f} requests failed (see {log.name}); give more --kv-memory")
        prompt = metric(m, "llamay_prompt_tokens_total") or 0
        if prompt == 0:
            sys.exit(f"{kv_mib} MiB {policy}: no request completed (see {log.name}); give more --kv-memory")
        cached = metric(m, "llamay_cached_prompt_tokens_total") or 0
        return {"kv_mib": kv_mib, "policy": policy, "wall_s": wall,
                "ttft1_ms": statistics.median(first), "ttft_ms": statistics.median(later) if later else float("nan"),
                "ttft_p90_ms": statistics.quantiles(later, n=10)[-1] if len(later) > 1 else max(later, default=float("nan")), "computed": prompt - cached,
                "cached": cached, "evictions": metric(m, "llamay_prefix_tree_evictions_total") or 0,
                "states_peak": sampler.peak, "states_end": end_states, "state_bytes": state_bytes}
    finally:
        proc.terminate()
        proc.wait()
        log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llamay", default=os.path.join(ROOT, "build/release/bin/llamay"))
    ap.add_argument("-m", "--model", help="GGUF (default: the synthetic hybrid shape in Q8_0)")
    ap.add_argument("--kv-memory", default="1024,384", help="KV budgets in MiB, comma-separated")
    ap.add_argument("--policies", default="value,last-use")
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--stagger", action="store_true", help="agents arrive one a round (see above)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cp_retention_")
    model = a.model
    if not model:
        model = os.path.join(tmp, "hybrid-q8_0.gguf")
        subprocess.run([a.llamay, "model", "synth", "--shape", "hybrid", "--type", "q8_0", "-o", model], check=True,
                       stdout=subprocess.DEVNULL)
    rows = []
    for kv in [int(x) for x in a.kv_memory.split(",")]:
        for policy in a.policies.split(","):
            r = run_one(a, model, kv, policy, tmp)
            rows.append(r)
            print(f"# {kv} MiB {policy}: {json.dumps(r)}", file=sys.stderr, flush=True)
    mib = lambda b: f"{b / (1 << 20):.0f}"  # noqa: E731
    print(f"model {os.path.basename(model)}, {a.agents} agents x {a.turns} turns"
          f"{' (staggered)' if a.stagger else ' (agent_trace.py)'}, {a.threads} threads, "
          f"one state {mib(rows[0]['state_bytes'])} MiB")
    print("| KV budget | retention | wall s | TTFT turn 1 ms | median TTFT turns 2+ ms | p90 ms | prompt tokens "
          "computed | cached | evictions | states+checkpoints peak MiB | at the end MiB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['kv_mib']} MiB | {r['policy']} | {r['wall_s']:.1f} | {r['ttft1_ms']:.0f} | {r['ttft_ms']:.0f} | "
              f"{r['ttft_p90_ms']:.0f} | {r['computed']:.0f} | {r['cached']:.0f} | {r['evictions']:.0f} | "
              f"{mib(r['states_peak'])} | {mib(r['states_end'])} |")


if __name__ == "__main__":
    main()
