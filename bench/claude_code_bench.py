#!/usr/bin/env python3
"""A Claude Code-shaped session on /v1/messages, side by side with llama.cpp (issue 19; docs/benchmarks.md).

Both servers get the same requests, as Claude Code sends them: a system prompt of about 15k tokens whose first
block is an `x-anthropic-billing-header: ...; cch=...;` line that changes on every request, a list of tools,
and a conversation of 10 turns (each a user message and a streamed answer of up to 32 tokens at temperature
0, whose text goes back into the history); between two turns a background request that shares the system
prompt (a title: one user message, 16 tokens). Per turn: the time to the first text delta (TTFT) and the
prompt tokens each server says it computed. The table gives the medians from turn 2 on and their ratio;
the goal is llamay at most 0.3x llama.cpp's.

Starts `llamay serve` and ../shared/peers/llama-server --jinja -np 1 on the same GGUF (default: the synthetic
Q8_0 peer-shape model, written by `llamay model synth`, its trained context raised to 32768 so that
llama-server does not cap the slot at 4096), one after the other, each alone on the machine. Do not run it
while anything compiles. Standard library only.

Usage: bench/claude_code_bench.py [-m MODEL] [--words N] [-t THREADS]
"""
import argparse, json, os, random, statistics, struct, subprocess, sys, tempfile, time, urllib.error, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.path.join(ROOT, "..", "shared")
sys.path.insert(0, os.path.join(SHARED, "bench"))
sys.path.insert(0, HERE)
import restore_bench as rb  # noqa: E402  (the shared workload's text)
from bench_util import free_port, peer_env, peer_model, stop, wait_up  # noqa: E402

TOOLS = [
    {"name": "Read", "description": "Reads a file from the local filesystem.",
     "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}, "offset": {"type": "integer"},
                                                       "limit": {"type": "integer"}}, "required": ["file_path"]}},
    {"name": "Bash", "description": "Executes a bash command.",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"},
                                                       "description": {"type": "string"}}, "required": ["command"]}},
    {"name": "Edit", "description": "Performs exact string replacements in files.",
     "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}, "old_string": {"type": "string"},
                                                       "new_string": {"type": "string"}},
                      "required": ["file_path", "old_string", "new_string"]}},
]


def system_blocks(words, rng):
    """Claude Code's system: the billing header (a new cch= every request), then the long fixed prompt."""
    header = f"x-anthropic-billing-header: cc_version=2.1.332.abc; cc_entrypoint=sdk-cli; cch={rng.getrandbits(40):010x};"
    return [{"type": "text", "text": header},
            {"type": "text", "text": "You are Claude Code, a coding agent. " + rb.text_of(words, 1),
             "cache_control": {"type": "ephemeral"}}]


def stream(url, body):
    """POSTs a streamed /v1/messages; returns (ms to the first text delta, text, usage of message_delta)."""
    req = urllib.request.Request(url + "/v1/messages", json.dumps(dict(body, stream=True)).encode(),
                                 {"Content-Type": "application/json", "x-api-key": "unused",
                                  "anthropic-version": "2023-06-01"})
    t0 = time.perf_counter()
    first, text, usage, start_usage = None, "", {}, {}
    try:
        r = urllib.request.urlopen(req, timeout=3600)
    except urllib.error.HTTPError as e:
        sys.exit(f"{url}: {e.code} {e.read().decode(errors='replace')[:500]}")
    with r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            e = json.loads(line[6:])
            if e.get("type") == "message_start":
                start_usage = e["message"].get("usage", {})
            if e.get("type") == "content_block_delta":
                if first is None:
                    first = (time.perf_counter() - t0) * 1000
                text += e["delta"].get("text", "")
            if e.get("type") == "message_delta":
                usage = e.get("usage", {})
    if first is None:
        first = (time.perf_counter() - t0) * 1000
    return first, text, {**start_usage, **usage}


def session(url, model, words, turns):
    """The session's turns on one server: [(ttft ms, prompt tokens computed)] per turn."""
    rng = random.Random(7)
    history, out = [], []
    for t in range(turns):
        history.append({"role": "user", "content": f"Turn {t}: " + rb.text_of(40, t + 2)})
        body = {"model": model, "max_tokens": 32, "temperature": 0, "system": system_blocks(words, rng),
                "tools": TOOLS, "messages": history}
        ttft, text, usage = stream(url, body)
        history.append({"role": "assistant", "content": text or "ok"})
        out.append((ttft, usage.get("input_tokens")))
        print(f"  turn {t + 1}: {ttft:8.0f} ms to the first token, input_tokens {usage.get('input_tokens')}, "
              f"cache_read {usage.get('cache_read_input_tokens')}", file=sys.stderr, flush=True)
        if t + 1 < turns:  # a background request: a title for the conversation, same system prompt
            stream(url, {"model": model, "max_tokens": 16, "temperature": 0, "system": system_blocks(words, rng),
                         "messages": [{"role": "user", "content": "A five-word title for: " + history[0]["content"]}]})
    return out


def raise_trained_context(path, n):
    """Sets the GGUF's <arch>.context_length (a u32) to n in place: llama-server caps a slot's context at the
    trained one (the synthetic model says 4096), and the session needs ~25k positions. The weights are
    synthetic: nothing is lost by saying they were trained longer."""
    with open(path, "r+b") as f:
        head = f.read(1 << 20)
        key = b"llama.context_length"
        at = head.find(struct.pack("<Q", len(key)) + key)
        if at < 0:
            sys.exit(f"{path}: no {key.decode()}")
        at += 8 + len(key)
        vtype, value = struct.unpack_from("<II", head, at)
        if vtype != 4:  # GGUF_TYPE_UINT32
            sys.exit(f"{path}: {key.decode()} is of GGUF type {vtype}, not u32")
        if value < n:
            f.seek(at + 4)
            f.write(struct.pack("<I", n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llamay", default=os.path.join(ROOT, "build/release/bin/llamay"))
    ap.add_argument("--peer", default=os.path.join(SHARED, "peers/llama-server"))
    ap.add_argument("-m", "--model", help="GGUF for both (default: a synthetic Q8_0 peer-shape model)")
    ap.add_argument("--words", type=int, default=14000,
                    help="words of system prompt (about a token a word with the default model's LLaMA vocabulary: "
                         "about 15,000 tokens, as Claude Code's; the runs in docs/benchmarks.md used 2,100 words "
                         "of the byte vocabulary, 7 tokens a word)")
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("-t", "--threads", type=int, default=2)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cc_bench_")
    procs = []
    results = {}
    try:
        model = peer_model(a.llamay, tmp, a.model)
        if not a.model:
            raise_trained_context(model, 32768)
        for name in ("llamay", "llama.cpp"):
            port = free_port()
            if name == "llamay":
                cmd = [a.llamay, "serve", "-m", model, "--port", str(port), "-t", str(a.threads), "-c", "32768"]
            else:
                # One slot: the whole context for the one session (with several, a slot gets a share of -c).
                cmd = [a.peer, "-m", model, "--port", str(port), "-t", str(a.threads), "--jinja", "-c", "32768",
                       "-np", "1"]
            env = None if name == "llamay" else peer_env(a.peer, model)
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
            wait_up(rb.Client(f"http://127.0.0.1:{port}"), procs[-1], name)
            print(f"{name}:", file=sys.stderr, flush=True)
            results[name] = session(f"http://127.0.0.1:{port}", "model", a.words, a.turns)
            procs[-1].terminate()
            procs[-1].wait()
            procs.pop()
        med = {n: statistics.median(x[0] for x in r[1:]) for n, r in results.items()}
        first = {n: r[0][0] for n, r in results.items()}
        computed = {n: statistics.median(x[1] or 0 for x in r[1:]) for n, r in results.items()}
        print(f"# Claude Code-shaped session on /v1/messages: {os.path.basename(model)}, {a.threads} threads, "
              f"{a.turns} turns with a background request between turns")
        print("| | turn 1 TTFT ms | median TTFT ms, turns 2+ | median prompt tokens computed, turns 2+ |")
        print("|---|---|---|---|")
        for n in ("llama.cpp", "llamay"):
            print(f"| {n} | {first[n]:.0f} | {med[n]:.0f} | {computed[n]:.0f} |")
        print(f"| llamay / llama.cpp | {first['llamay'] / first['llama.cpp']:.2f} | "
              f"{med['llamay'] / med['llama.cpp']:.2f} | |")
    finally:
        stop(procs, tmp)


if __name__ == "__main__":
    main()
