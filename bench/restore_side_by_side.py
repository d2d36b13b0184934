#!/usr/bin/env python3
"""Restore side by side: llamay against llama.cpp's server, one machine, one run (docs/benchmarks.md).

Starts `llamay serve` and ../shared/peers/llama-server on the same GGUF (default: a synthetic Q8_0 model of
the peer shape, written by `llamay model synth`), then for prompts of about 128 to 4,096 tokens measures,
interleaved per length:
  - llamay: POST /v1/contexts (cold prefill), GET .../snapshot, then the median of N
    POST /v1/contexts/restore (the upload streams into pages), and of N restore + a completion with an
    empty prompt (the first token comes from the logits stored in the snapshot: no forward pass); then
    .../push into a directory store and the median of N restores by name (no upload: llama.cpp's slot
    restore also reads a file the server already has), alone and + the first token;
  - llama.cpp: /slots/0?action=save, then the median of N erase + restore, and of N erase + restore +
    /completion n_predict 1 (it re-evaluates the last prompt token), as ../shared/bench/restore_bench.py.
Prints one table with both, the file sizes and the ratios (llamay / llama.cpp: below 1 is faster).
Standard library only.
"""
import argparse, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.path.join(ROOT, "..", "shared")
sys.path.insert(0, os.path.join(SHARED, "bench"))
sys.path.insert(0, HERE)
import restore_bench as rb  # noqa: E402  (the shared workload's client and text)
from bench_util import free_port, peer_env, peer_model, stop, wait_up  # noqa: E402


def llamay_case(cl, text, reps):
    cold, ctx = cl.req("POST", "/v1/contexts", {"prompt": text})
    cid, ntok = ctx["id"], ctx["tokens"]
    _, snap = cl.req("GET", f"/v1/contexts/{cid}/snapshot", raw=True)
    rest, first = [], []
    hdr = {"Content-Type": "application/octet-stream"}
    for _ in range(reps):
        dt, r = cl.req("POST", "/v1/contexts/restore", snap, headers=hdr)
        rest.append(dt)
        cl.req("DELETE", f"/v1/contexts/{r['id']}")
    for _ in range(reps):
        t0 = time.perf_counter()
        _, r = cl.req("POST", "/v1/contexts/restore", snap, headers=hdr)
        cl.req("POST", "/v1/completions", {"prompt": "", "max_tokens": 1, "temperature": 0, "llamay_session": r["id"]})
        first.append((time.perf_counter() - t0) * 1000)
        cl.req("DELETE", f"/v1/contexts/{r['id']}")
    cl.req("POST", f"/v1/contexts/{cid}/push", {"name": "sbs"})
    named, named_first = [], []
    for _ in range(reps):
        dt, r = cl.req("POST", "/v1/contexts/restore", {"name": "sbs"})
        named.append(dt)
        cl.req("DELETE", f"/v1/contexts/{r['id']}")
    for _ in range(reps):
        t0 = time.perf_counter()
        _, r = cl.req("POST", "/v1/contexts/restore", {"name": "sbs"})
        cl.req("POST", "/v1/completions", {"prompt": "", "max_tokens": 1, "temperature": 0, "llamay_session": r["id"]})
        named_first.append((time.perf_counter() - t0) * 1000)
        cl.req("DELETE", f"/v1/contexts/{r['id']}")
    cl.req("DELETE", f"/v1/contexts/{cid}")
    return (ntok, cold, statistics.median(rest), statistics.median(first), len(snap), statistics.median(named),
            statistics.median(named_first))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llamay", default=os.path.join(ROOT, "build/release/bin/llamay"))
    ap.add_argument("--peer", default=os.path.join(SHARED, "peers/llama-server"))
    ap.add_argument("-m", "--model", help="GGUF for both (default: a synthetic Q8_0 peer-shape model)")
    ap.add_argument("--words", default="125,500,2000,4000",
                    help="words per prompt (about a token a word with the default model's LLaMA vocabulary; "
                         "the byte vocabulary of `model synth --tokenizer bytes` makes it 7)")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("-t", "--threads", type=int, default=2)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="restore_sbs_")
    procs = []
    try:
        model = peer_model(a.llamay, tmp, a.model)
        lp, pp = free_port(), free_port()
        slots = os.path.join(tmp, "slots")
        os.makedirs(slots)
        procs.append(subprocess.Popen([a.llamay, "serve", "-m", model, "--port", str(lp), "-t", str(a.threads),
                                       "--max-body", "1024", "--store", os.path.join(tmp, "store")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_up(rb.Client(f"http://127.0.0.1:{lp}"), procs[-1], "llamay")
        procs.append(subprocess.Popen([a.peer, "-m", model, "--port", str(pp), "-t", str(a.threads), "-np", "1",
                                       "--slot-save-path", slots + "/"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      env=peer_env(a.peer, model)))
        wait_up(rb.Client(f"http://127.0.0.1:{pp}"), procs[-1], "llama-server")
        lc, pc = rb.Client(f"http://127.0.0.1:{lp}"), rb.Client(f"http://127.0.0.1:{pp}")
        print(f"# restore side by side: {os.path.basename(model)}, {a.threads} threads, median of {a.reps}")
        print("| tokens | llama.cpp slot restore ms | llamay restore by name ms | ratio | llamay upload restore ms | ratio | "
              "llama.cpp restore + 1st token ms | llamay by name + 1st token ms | ratio | llamay upload + 1st token ms | ratio | "
              "llamay file | llama.cpp file | llamay prefill / by name | llama.cpp prefill / restore |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for i, w in enumerate(int(x) for x in a.words.split(",")):
            text = rb.text_of(w, i)
            n, lcold, lrest, lfirst, lsize, lname, lname_first = llamay_case(lc, text, a.reps)
            _, pcold, prest, pfirst, psize = rb.peer_case(pc, text, a.reps, f"sbs_{w}.bin")
            print(f"| {n} | {prest:.2f} | {lname:.2f} | {lname / prest:.2f} | {lrest:.2f} | {lrest / prest:.2f} | "
                  f"{pfirst:.2f} | {lname_first:.2f} | {lname_first / pfirst:.2f} | {lfirst:.2f} | {lfirst / pfirst:.2f} | "
                  f"{lsize / 1e6:.1f} MB | {psize / 1e6:.1f} MB | {lcold / lname:.0f}x | {pcold / prest:.0f}x |", flush=True)
    finally:
        stop(procs, tmp)


if __name__ == "__main__":
    main()
