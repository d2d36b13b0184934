#!/usr/bin/env python3
"""Writes iq_ref_{iq4_nl,mxfp4,iq4_xs}.json: llama.cpp's next-token distributions on a small synthetic llama
model whose matrices (and token embeddings) are IQ4_NL, MXFP4 or IQ4_XS, the references that
quant_model_test.cc holds llamay's lookup-table kernels to (dequantisation of the embeddings, the dot products
against Q8_0 or Q8_K activations).

Each model is `llamay model synth` with the small dimensions below and the type's weights as llamay's
quantiser writes them (the bytes are the same on every machine: an integer PRNG, then round-to-nearest);
the test builds the same bytes in process and checks their FNV-1a hash against the one recorded here.
llama.cpp runs them exactly as make_moe_ref.py runs its models (same prompts, steps and settings), in its
avx2 build (LLAMA_PEER_VARIANT=avx2, unless set: ../shared/peers/README.md, quantised files on machines
whose AMX faults).

Usage: src/model/testdata/make_iq_ref.py [LLAMAY_BINARY]   (default build/release/bin/llamay)
Standard library only.
"""
import os, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_moe_ref import ROOT, reference  # noqa: E402

# These flags and model_test_util.h's TinyLlamaSpec() must describe the same files.
COMMON = ["--shape", "peer", "--vocab", "512", "--dim", "256", "--layers", "2", "--heads", "4", "--kv-heads", "2",
          "--ffn", "512"]
TYPES = {t: COMMON + ["--type", t, "--name", f"tiny-{t}"] for t in ("iq4_nl", "mxfp4", "iq4_xs")}


def main():
    os.environ.setdefault("LLAMA_PEER_VARIANT", "avx2")
    llamay = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "release", "bin", "llamay")
    tmp = tempfile.mkdtemp()
    for t, synth in TYPES.items():
        reference(llamay, tmp, t, synth, prefix="iq_ref", script="make_iq_ref.py")


if __name__ == "__main__":
    main()
