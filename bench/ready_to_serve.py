#!/usr/bin/env python3
"""Ready to serve (issue 12): from `llamay serve`'s exec to its first /health 200, and to the end of a first
1-token completion, against reading the model file from the page cache.

Usage: bench/ready_to_serve.py MODEL.gguf [MODEL.gguf ...]   (run from the repository root, after a build)
Each model is measured READY_REPS times (default 5), the read and the start alternating; the table gives
medians, and "ready / read" is the median of the per-repetition ratios.
"""
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

LLAMAY = os.environ.get("LLAMAY_BIN", "build/release/bin/llamay")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_seconds(path):
    """read(2) in 8 MiB pieces, the file already in the page cache (read once before)."""
    with open(path, "rb", buffering=0) as f:
        while f.read(8 << 20):
            pass
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.read(8 << 20):
            pass
    return time.perf_counter() - t


def complete(port, prompt):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps({"prompt": prompt, "max_tokens": 1, "temperature": 0}).encode(),
                                 headers={"content-type": "application/json"})
    urllib.request.urlopen(req, timeout=60).read()


def measure_once(path):
    read = read_seconds(path)
    port = free_port()
    t0 = time.perf_counter()
    p = subprocess.Popen([LLAMAY, "serve", "-m", path, "--port", str(port), "-t", "2"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
                break
            except OSError:
                if p.poll() is not None:
                    sys.exit(f"llamay serve exited with {p.returncode}")
                time.sleep(0.002)
        ready = time.perf_counter() - t0
        complete(port, "hi")
        first = time.perf_counter() - t0
        t1 = time.perf_counter()
        complete(port, "ho")
        second = time.perf_counter() - t1
    finally:
        p.terminate()
        p.wait()
    return read, ready, first, second


def measure(path, reps):
    runs = [measure_once(path) for _ in range(reps)]
    read, ready, first, second = (statistics.median(r[i] for r in runs) for i in range(4))
    ratio = statistics.median(r[1] / r[0] for r in runs)
    print(f"| {os.path.basename(path)} | {read * 1e3:.1f} | {ready * 1e3:.1f} | {ratio:.2f} | "
          f"{first * 1e3:.1f} | {second * 1e3:.1f} |")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("| model | read from page cache (ms) | /health 200 after (ms) | ready / read | first 1-token completion done (ms) | "
          "a second one (ms) |")
    print("|---|---|---|---|---|---|")
    reps = int(os.environ.get("READY_REPS", "5"))
    for path in sys.argv[1:]:
        measure(path, reps)


if __name__ == "__main__":
    main()
