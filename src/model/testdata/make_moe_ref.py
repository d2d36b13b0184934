#!/usr/bin/env python3
"""Writes moe_ref_{qwen3moe,qwen2moe,granitehybrid,qwen35moe,olmoe,gpt-oss}.json: llama.cpp's next-token distributions on small synthetic
mixture-of-experts models, the references that moe_model_test.cc holds llamay's MoE path to.

Each model is `llamay model synth --shape NAME` with the small dimensions below, f32 weights: its bytes
are the same on every machine (an integer PRNG), and the test builds the same bytes in process and checks
their FNV-1a hash against the one recorded here before it compares anything. llama.cpp runs it as
../shared/peers/llama-server with an f32 KV cache and flash attention off (the settings of ../shared/ref),
and for each prompt answers, at the prompt's end and after each of four steps, the top 16 tokens with
their log-probabilities (post_sampling_probs false: the model's own distribution). Each step appends the
most probable token that is valid text on its own (see next_token_logprobs).

Usage: src/model/testdata/make_moe_ref.py [LLAMAY_BINARY [SHAPE...]]   (default build/release/bin/llamay, every shape)
Standard library only.
"""
import json, os, random, subprocess, sys, tempfile, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_util import free_port  # noqa: E402

# The models: these flags and model_test_util.h's TinyMoeSpec() must describe the same files.
COMMON = ["--type", "f32", "--vocab", "512", "--dim", "128", "--layers", "3", "--heads", "4", "--kv-heads", "2",
          "--head-dim", "32", "--experts", "16", "--experts-used", "4", "--expert-ffn", "64"]
SHAPES = {
    "qwen3moe": ["--shape", "qwen3moe", "--name", "tiny-qwen3moe"] + COMMON,
    "qwen2moe": ["--shape", "qwen2moe", "--name", "tiny-qwen2moe", "--shared-ffn", "96"] + COMMON,
    # Granite 4.0-H's experts on its hybrid layers: Mamba-2, Mamba-2, Mamba-2, attention.
    "granitehybrid": ["--shape", "hybrid-moe", "--name", "tiny-granitemoe", "--type", "f32", "--vocab", "512",
                      "--dim", "128", "--ssm-inner", "256", "--layers", "4", "--heads", "4", "--kv-heads", "2", "--experts", "16",
                      "--experts-used", "4", "--expert-ffn", "64", "--shared-ffn", "96"],
    # Qwen3.5's MoE (test_util::TinyQwen35Spec's layers: delta nets but layers 2 and 5) with a gated shared expert.
    "qwen35moe": ["--shape", "qwen35moe", "--name", "tiny-qwen35moe", "--type", "f32", "--vocab", "512", "--dim", "128",
                  "--layers", "6", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--ssm-heads", "4",
                  "--ssm-groups", "2", "--ssm-state", "32", "--attention-every", "3", "--experts", "16",
                  "--experts-used", "4", "--expert-ffn", "64", "--shared-ffn", "96"],
    # OLMoE: no grouped-query attention (llama.cpp's olmoe wants k_norm as wide as the embedding).
    "olmoe": ["--shape", "olmoe", "--name", "tiny-olmoe"] + [("4" if prev == "--kv-heads" else a)
                                                               for prev, a in zip([""] + COMMON, COMMON)],
    # gpt-oss: a window of 8 on the even layers, so that the prompts below reach past it.
    "gpt-oss": ["--shape", "gpt-oss", "--name", "tiny-gpt-oss", "--window", "8"] + COMMON,
}
TOP = 16
BYTE0 = 3  # the synthetic vocabulary's <0x00>: bytes are ids 3..258
STEPS = 4


def fnv1a(data):
    h = 1469598103934665603
    for c in data:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def next_token_logprobs(port, tokens):
    """The top TOP (id, logprob) after `tokens`, most probable first, and the token that continues: the most
    probable one that is not end-of-text or a byte of a multi-byte character (llama-server answers 500 when
    the text it generated is not valid UTF-8, so those are given a bias of -inf; the probabilities reported
    are the model's own, before any sampler)."""
    bias = [[2, False]] + [[BYTE0 + b, False] for b in range(0x80, 0x100)]
    body = {"prompt": tokens, "n_predict": 1, "temperature": 0, "n_probs": TOP, "post_sampling_probs": False,
            "cache_prompt": False, "stream": True, "logit_bias": bias}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: "):])
            if event.get("completion_probabilities"):
                probs = event["completion_probabilities"][0]
                return [[t["id"], t["logprob"]] for t in probs["top_logprobs"]], probs["id"]
    sys.exit(f"llama-server sent no probabilities after {tokens}")


def reference(llamay, tmp, shape, synth, prefix="moe_ref", script="make_moe_ref.py"):
    model = os.path.join(tmp, f"tiny-{shape}.gguf")
    subprocess.run([llamay, "model", "synth", *synth, "-o", model], check=True, stdout=subprocess.DEVNULL)
    with open(model, "rb") as f:
        digest = fnv1a(f.read())
    port = free_port()
    peer = os.path.join(ROOT, "..", "shared", "peers", "llama-server")
    proc = subprocess.Popen([peer, "-m", model, "--port", str(port), "-t", "2", "-c", "512", "-ctk", "f32",
                             "-ctv", "f32", "-fa", "off", "-np", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        rng = random.Random(7)
        # A short prompt, one of 40 tokens and one of 100 (past a 64-token page), BOS (1) first.
        prompts = [[1, 72, 101, 108, 108, 111]] + [[1] + [rng.randrange(3, 512) for _ in range(n)] for n in (39, 99)]
        cases = []
        for prompt in prompts:
            tokens, steps = list(prompt), []
            for _ in range(STEPS + 1):
                top, next_id = next_token_logprobs(port, tokens)
                steps.append(top)
                tokens.append(next_id)
            cases.append({"prompt": prompt, "continuation": tokens[len(prompt):], "top_logprobs": steps})
    finally:
        proc.terminate()
        proc.wait()
    ref = {"about": "llama.cpp (../shared/peers/llama-server, f32 KV, flash attention off) on `llamay model synth "
                    + " ".join(synth) + "`; written by " + script,
           "model_fnv1a": f"{digest:016x}", "cases": cases}
    out = os.path.join(HERE, f"{prefix}_{shape}.json")
    with open(out, "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    print(f"wrote {out} ({len(cases)} prompts, model fnv1a {digest:016x})")


def main():
    llamay = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "release", "bin", "llamay")
    tmp = tempfile.mkdtemp()
    only = sys.argv[2:]  # shapes to write (default: all)
    for shape, synth in SHAPES.items():
        if not only or shape in only:
            reference(llamay, tmp, shape, synth)


if __name__ == "__main__":
    main()
