#!/usr/bin/env python3
"""Agents' API benchmarks (issue 11), one server, one run (docs/benchmarks.md):

  1. Decode with and without a JSON Schema: streamed chat completions of up to 128 tokens at temperature 1,
     interleaved (plain, schema, plain, schema, ...); decode tokens/s of each = (tokens - 1) / (last chunk -
     first chunk). Medians and their ratio.
  2. An agent tool loop of 10 turns, stateless and as a llamay_session: each turn asks with tools and
     tool_choice "required" (streamed), gets a
     call, appends it and a tool result, and asks again. Per turn: prompt tokens, tokens prefilled (prompt -
     cached: the prefix tree holds the rest), the tool result's own tokens, and the time to the first chunk;
     beside it the same turn's messages with a different system prompt (nothing reusable: a full prefill).

Starts `llamay serve` on the GGUF given with -m (default: the synthetic Q8_0 peer-shape model, 160M, written
by `llamay model synth`). Standard library only.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_util import free_port, peer_model, stop  # noqa: E402

SCHEMA = {"type": "object", "properties": {
    "title": {"type": "string"}, "year": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
    "notes": {"type": "string"}}, "required": ["title", "year", "tags", "notes"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file of the project",
          "parameters": {"type": "object", "properties": {"path": {"type": "string", "maxLength": 40},
                                                           "line": {"type": "integer", "minimum": 1}},
                         "required": ["path"], "additionalProperties": False}}},
         {"type": "function", "function": {"name": "run_tests", "description": "Run the tests",
          "parameters": {"type": "object", "properties": {"filter": {"type": "string", "maxLength": 20}},
                         "required": ["filter"], "additionalProperties": False}}}]


def stream(url, body):
    """POSTs a streamed chat completion; returns (time to first chunk ms, chunk times, final usage, message)."""
    body = dict(body, stream=True, stream_options={"include_usage": True})
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    times, usage, content, calls = [], None, "", {}
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: {"):
                continue
            chunk = json.loads(line[6:])
            now = time.perf_counter()
            if chunk.get("usage"):
                usage = chunk["usage"]
            for ch in chunk.get("choices", []):
                d = ch.get("delta", {})
                if "content" in d or "tool_calls" in d or "role" in d:
                    times.append(now)
                content += d.get("content") or ""
                for tc in d.get("tool_calls", []):
                    c = calls.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
                    c["id"] = tc.get("id") or c["id"]
                    c["name"] = tc.get("function", {}).get("name") or c["name"]
                    c["arguments"] += tc.get("function", {}).get("arguments") or ""
    message = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                                 for _, c in sorted(calls.items())]
    return (times[0] - t0) * 1000 if times else float("nan"), times, usage, message


def decode_rate(times, usage):
    n = usage["completion_tokens"]
    return (n - 1) / (times[-1] - times[0]) if n > 1 and times[-1] > times[0] else float("nan")


def tokens_of(url, text):
    req = urllib.request.Request(url + "/v1/completions", json.dumps({"prompt": text, "max_tokens": 0}).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)["usage"]["prompt_tokens"] - 1  # without BOS


def post(url, path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def agent_loop(url, turns, mode):
    system = {"role": "system", "content": "You are a coding agent. Use the tools to inspect and test the project."}
    user = {"role": "user", "content": "The build fails in src/engine. Find out why and fix it."}
    messages, new = [system, user], [system, user]
    session = post(url, "/v1/contexts", {})["id"] if mode == "session" else None
    print(f"\n{mode}: " + ("each turn sends the whole conversation" if mode == "stateless" else
                          "each turn sends only its new messages, with llamay_session"))
    print("\n| turn | prompt tokens | prefilled | tool result tokens | first chunk (ms) | same turn cold (ms) |")
    print("|---|---|---|---|---|---|")
    prev_result = None
    for turn in range(1, turns + 1):
        body = {"messages": messages if mode == "stateless" else new, "tools": TOOLS, "tool_choice": "required",
                "max_tokens": 200, "temperature": 0.7, "seed": turn}
        if session:
            body["llamay_session"] = session
        ttft, _, usage, message = stream(url, body)
        # The same conversation with another system prompt: nothing reusable, a full prefill.
        cold_msgs = [dict(system, content=system["content"] + f" ({mode} cold run {turn})")] + messages[1:]
        cold_ttft, _, _, _ = stream(url, {"messages": cold_msgs, "tools": TOOLS, "tool_choice": "required",
                                          "max_tokens": 1})
        result = json.dumps({"ok": turn % 3 != 0, "output": f"line {turn * 7}: expected ';' before '}}' token"})
        prefilled = usage["prompt_tokens"] - usage["prompt_tokens_details"]["cached_tokens"]
        result_tokens = tokens_of(url, prev_result) if prev_result else "-"
        prev_result = result
        print(f"| {turn} | {usage['prompt_tokens']} | {prefilled} | {result_tokens} | {ttft:.1f} | {cold_ttft:.1f} |")
        messages.append(message)
        new = []
        for call in message.get("tool_calls", []):
            tool_msg = {"role": "tool", "tool_call_id": call["id"], "content": result}
            messages.append(tool_msg)
            new.append(tool_msg)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llamay", default=os.path.join(os.path.dirname(HERE), "build/release/bin/llamay"))
    ap.add_argument("-m", "--model", help="GGUF (default: a synthetic Q8_0 peer-shape model)")
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("--reps", type=int, default=8, help="requests of each kind in part 1")
    ap.add_argument("--turns", type=int, default=10)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="llamay-agent-bench.")
    procs = []
    try:
        model = peer_model(a.llamay, tmp, a.model)
        port = free_port()
        cmd = [a.llamay, "serve", "-m", model, "--port", str(port), "--ctx-size", "8192"]
        if a.threads:
            cmd += ["-t", str(a.threads)]
        procs.append(subprocess.Popen(cmd, stderr=subprocess.DEVNULL))
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/health")
                break
            except Exception:
                time.sleep(0.1)
        print(f"model: {os.path.basename(model)}")

        # 1. Decode with and without a schema.
        plain, schema = [], []
        for i in range(a.reps):
            for kind, out in (("plain", plain), ("schema", schema)):
                body = {"messages": [{"role": "user", "content": f"Describe a film, as JSON ({i})."}],
                        "max_tokens": 128, "temperature": 1, "seed": i}
                if kind == "schema":
                    body["response_format"] = {"type": "json_schema", "json_schema": {"name": "film", "schema": SCHEMA}}
                _, times, usage, _ = stream(url, body)
                out.append(decode_rate(times, usage))
        p, s = statistics.median(plain), statistics.median(schema)
        print("\n| decode (128 tokens max, temperature 1) | tokens/s (median of %d) |" % a.reps)
        print("|---|---|")
        print(f"| no constraint | {p:.1f} |")
        print(f"| JSON Schema (response_format) | {s:.1f} |")
        print(f"| ratio (schema / none) | {s / p:.2f} |")

        # 2. The agent loop, stateless (every turn sends the whole conversation; the prefix tree finds what
        # it can) and as a llamay_session (every turn sends only its new messages).
        for mode in ("stateless", "session"):
            agent_loop(url, a.turns, mode)
    finally:
        stop(procs, tmp)


if __name__ == "__main__":
    main()
