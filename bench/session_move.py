#!/usr/bin/env python3
"""Sessions through a snapshot store (docs/benchmarks.md, issue 10), one machine, one run:

  1. push: a context of N tokens pushed into the store, then a fork of it that grew by one turn:
     bytes sent for each (the fork sends only the chunks past the shared prefix);
  2. a session moving between instances: two `llamay serve --store DIR --share-sessions`; a session of N
     tokens committed by instance A continues on instance B (B pulls it: time to first token), against a
     cold prefill of the same tokens on B (a new session with the whole text).
Median of --reps. Standard library only. The store is a directory, or with --s3 npm s3rver on loopback
(tests/e2e/lib/s3_fault_server.mjs, no faults: it checks every request's SigV4 signature), which needs node
and tests/e2e/node_modules (scripts/setup).
"""
import argparse, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "..", "shared", "bench"))
sys.path.insert(0, HERE)
import restore_bench as rb  # noqa: E402  (the shared workload's client and text)
from bench_util import free_port, peer_model, stop, wait_up  # noqa: E402


def start(llamay, model, store, threads, share=True, env=None):
    port = free_port()
    args = [llamay, "serve", "-m", model, "--port", str(port), "-t", str(threads), "--store", store]
    if share:
        args.append("--share-sessions")
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    client = rb.Client(f"http://127.0.0.1:{port}")
    wait_up(client, p, "llamay")
    return p, client


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llamay", default=os.path.join(ROOT, "build/release/bin/llamay"))
    ap.add_argument("-m", "--model", help="GGUF (default: a synthetic Q8_0 peer-shape model)")
    ap.add_argument("--words", default="75,290,560")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--s3", action="store_true", help="an S3 store (s3rver on loopback) instead of a directory")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="session_move_")
    procs = []
    try:
        model = peer_model(a.llamay, tmp, a.model)
        env, store, push_store = None, os.path.join(tmp, "store"), os.path.join(tmp, "push-store")
        if a.s3:
            s3 = subprocess.Popen(["node", os.path.join(ROOT, "tests/e2e/lib/s3_fault_server.mjs"), "--access-key", "BENCH",
                                   "--secret-key", "bench-secret", "--bucket", "llamay-bench"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            procs.append(s3)
            line = s3.stdout.readline()
            if "READY" not in line:
                sys.exit("s3rver did not start: " + line)
            proxy = line.split("proxy=")[1].split()[0]
            env = dict(os.environ, AWS_ACCESS_KEY_ID="BENCH", AWS_SECRET_ACCESS_KEY="bench-secret", AWS_REGION="us-east-1",
                       AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{proxy}")
            store, push_store = "s3://llamay-bench/shared", "s3://llamay-bench/push"
        pa, ca = start(a.llamay, model, store, a.threads, env=env)
        pb, cb = start(a.llamay, model, store, a.threads, env=env)
        # Pushes are measured on an instance of its own store that does not share sessions (a sharing
        # instance has already written each context through when it was created).
        pp, cp = start(a.llamay, model, push_store, a.threads, share=False, env=env)
        procs += [pa, pb, pp]
        kind = "s3rver on loopback" if a.s3 else "a directory store"
        print(f"# sessions through {kind}: {os.path.basename(model)}, {a.threads} threads, median of {a.reps}")
        print("| tokens | push full: bytes sent | push fork (+1 turn): bytes sent | fork / full | "
              "turn on the other instance: TTFT ms | next turn where it is held: ms | cold prefill of the same tokens: ms | cold / moved |")
        print("|---|---|---|---|---|---|---|---|")
        for i, w in enumerate(int(x) for x in a.words.split(",")):
            text = rb.text_of(w, i)
            _, ctx = cp.req("POST", "/v1/contexts", {"prompt": text})
            full = cp.req("POST", f"/v1/contexts/{ctx['id']}/push", {"name": f"full{w}"})[1]
            _, fork = cp.req("POST", f"/v1/contexts/{ctx['id']}/fork")
            bid = fork["branches"][0]["id"]
            cp.req("POST", "/v1/completions", {"prompt": " and one more turn", "max_tokens": 8, "temperature": 0, "llamay_session": bid})
            forked = cp.req("POST", f"/v1/contexts/{bid}/push", {"name": f"fork{w}"})[1]
            moved, cold, commit = [], [], []
            for r in range(a.reps):
                # A fresh session on A (committed), continued on B: B pulls it.
                _, s = ca.req("POST", "/v1/contexts", {"prompt": text})
                dt, _ = cb.req("POST", "/v1/completions", {"prompt": f" turn {r}", "max_tokens": 1, "temperature": 0,
                                                          "llamay_session": s["id"]})
                moved.append(dt)
                # What the write-through costs: the same kind of turn on the instance that holds the session.
                dt, _ = cb.req("POST", "/v1/completions", {"prompt": f" again {r}", "max_tokens": 1, "temperature": 0,
                                                          "llamay_session": s["id"]})
                commit.append(dt)
                # The same tokens prefilled cold on B (a new text each time: nothing in its prefix tree).
                dt, _ = cb.req("POST", "/v1/completions", {"prompt": f"{r} " + text + f" turn {r}", "max_tokens": 1,
                                                          "temperature": 0})
                cold.append(dt)
            m, c, k = statistics.median(moved), statistics.median(cold), statistics.median(commit)
            print(f"| {ctx['tokens']} | {full['bytes_sent'] / 1e6:.2f} MB | {forked['bytes_sent'] / 1e6:.2f} MB | "
                  f"{forked['bytes_sent'] / full['bytes_sent']:.2f} | {m:.1f} | {k:.1f} | {c:.1f} | {c / m:.1f}x |", flush=True)
    finally:
        stop(procs, tmp)


if __name__ == "__main__":
    main()
