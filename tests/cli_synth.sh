#!/usr/bin/env bash
# `llamay model synth`: files of a given shape in every weight type llamay quantises to, byte-identical on
# every run (both engines of a side-by-side benchmark load the same file), each one loadable; a type or a
# shape it cannot write is the user's error (exit 2).
# Usage: cli_synth.sh LLAMAY_BINARY SHARED_DIR
set -euo pipefail
bin=$1
shared=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
shape=(--vocab 300 --dim 256 --layers 2 --heads 4 --kv-heads 2 --ffn 256)
"$bin" model synth --type all "${shape[@]}" -o "$dir" >"$dir/out.txt"
n=$(ls "$dir"/peer-*.gguf | wc -l)
[ "$n" -eq 16 ] || { echo "want 16 files, got $n:"; cat "$dir/out.txt"; exit 1; }
for f in "$dir"/peer-*.gguf; do
  "$bin" run -m "$f" -p "hello" -n 2 --seed 1 >/dev/null 2>&1 || { echo "$f does not run"; exit 1; }
done
"$bin" model synth --type q8_0 "${shape[@]}" -o "$dir/again.gguf" >/dev/null
cmp -s "$dir/again.gguf" "$dir/peer-q8_0.gguf" || { echo "two runs wrote different bytes"; exit 1; }
"$bin" model synth --type q8_0 "${shape[@]}" --seed 7 -o "$dir/seed7.gguf" >/dev/null
if cmp -s "$dir/seed7.gguf" "$dir/peer-q8_0.gguf"; then echo "--seed changed nothing"; exit 1; fi
"$bin" model synth --type q8_0 --shape hybrid --vocab 300 --dim 256 --layers 4 --heads 4 --kv-heads 2 --ffn 256 \
  -o "$dir/hybrid.gguf" >/dev/null
"$bin" run -m "$dir/hybrid.gguf" -p "hello" -n 2 --seed 1 >/dev/null 2>&1 || { echo "the hybrid file does not run"; exit 1; }
# A Qwen3.5 MoE with its recurrent geometry set (value heads x state = d_inner), and one with a layer pattern the
# shape does not take by default: both run.
"$bin" model synth --type q8_0 --shape qwen35moe --vocab 300 --dim 128 --layers 3 --heads 4 --kv-heads 2 --head-dim 32 \
  --ssm-heads 4 --ssm-groups 2 --ssm-state 32 --attention-every 3 --experts 8 --experts-used 2 --expert-ffn 64 \
  --shared-ffn 64 -o "$dir/qwen35moe.gguf" >/dev/null
"$bin" run -m "$dir/qwen35moe.gguf" -p "hello" -n 2 --seed 1 >/dev/null 2>&1 || { echo "the qwen35moe file does not run"; exit 1; }
# Without --vocab: LLaMA's SentencePiece vocabulary from ../shared (about a token a word); --tokenizer bytes:
# the byte vocabulary (28 tokens for "The quick brown fox": a byte each, and 3 for each SentencePiece space).
tiny=(--dim 64 --layers 1 --heads 2 --kv-heads 1 --ffn 64)
"$bin" model synth --type f32 "${tiny[@]}" -o "$dir/llama.gguf" >"$dir/llama.txt"
grep -q "tokenizer of ggml-vocab-llama-spm.gguf: 32000 tokens" "$dir/llama.txt" || { echo "no LLaMA vocabulary:"; cat "$dir/llama.txt"; exit 1; }
"$bin" model synth --type f32 "${tiny[@]}" --tokenizer bytes -o "$dir/bytes.gguf" >/dev/null
quick=$("$bin" tokenize -m "$dir/llama.gguf" --no-bos -p "The quick brown fox")
[ "$quick" = "$("$bin" tokenize -m "$shared/ref/vocab/ggml-vocab-llama-spm.gguf" --no-bos -p "The quick brown fox")" ] ||
  { echo "the synthetic model tokenizes otherwise than its vocabulary: $quick"; exit 1; }
n_llama=$(echo "$quick" | tr ',' '\n' | wc -l)
n_bytes=$("$bin" tokenize -m "$dir/bytes.gguf" --no-bos -p "The quick brown fox" | tr ',' '\n' | wc -l)
[ "$n_llama" -le 5 ] && [ "$n_bytes" -eq 28 ] || { echo "tokens: $n_llama with LLaMA's vocabulary, $n_bytes with bytes"; exit 1; }
"$bin" run -m "$dir/llama.gguf" -p "hello" -n 2 --seed 1 >/dev/null 2>&1 || { echo "the LLaMA-vocabulary file does not run"; exit 1; }
set +e
"$bin" model synth --type f32 "${tiny[@]}" --tokenizer "$dir/missing.gguf" -o "$dir/bad.gguf" >/dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] && [ ! -e "$dir/bad.gguf" ] || { echo "a missing --tokenizer file: exit $rc, want 2 and no file"; exit 1; }
small="--vocab 300 --layers 2 --heads 4 --kv-heads 2 --ffn 256"
for args in "--type iq2_xxs --dim 256" "--type bogus --dim 256" "--shape bogus --dim 256" "--type q4_K --dim 64" \
  "--dim 256 --ssm-heads 4" "--dim 256 --attention-every 2" "--shape qwen35moe --dim 256 --ssm-state 48 --ssm-heads 3"; do
  set +e
  # shellcheck disable=SC2086
  "$bin" model synth $args $small -o "$dir/bad.gguf" >/dev/null 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "synth $args: exit $rc, want 2"; exit 1; }
  [ ! -e "$dir/bad.gguf" ] || { echo "synth $args left a file"; exit 1; }
done
echo "llamay model synth ok"
