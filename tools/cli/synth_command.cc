#include "synth_command.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "base/file.h"
#include "ctx_commands.h"
#include "format.h"
#include "gguf/gguf.h"
#include "kernels/dequant.h"
#include "model/demo_model.h"
#include "model/synthetic_model.h"

namespace llamay::cli {
namespace {

// Every type `--type all` writes: the ones llamay quantises to, in llama.cpp's naming.
constexpr TensorType kAllTypes[] = {
    TensorType::kF32,  TensorType::kF16,    TensorType::kBF16,   TensorType::kQ8_0,
    TensorType::kQ5_0, TensorType::kQ5_1,   TensorType::kQ4_0,   TensorType::kQ4_1,
    TensorType::kQ6_K, TensorType::kQ5_K,   TensorType::kQ4_K,   TensorType::kQ3_K,
    TensorType::kQ2_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS, TensorType::kMXFP4};

struct SynthOptions {
  std::string output;
  std::string type = "q8_0";
  std::string shape =
      "peer";  // peer | hybrid | hybrid-moe | qwen35 | qwen35moe | qwen3moe | qwen2moe | olmoe | gpt-oss
  std::string name;
  // Overrides of the shape's dimensions (0: the shape's own).
  uint32_t n_vocab = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0;
  uint32_t head_dim = 0;                                                       // the MoE shapes and qwen35
  uint32_t n_expert = 0, n_expert_used = 0, n_ff_expert = 0, n_ff_shared = 0;  // the MoE shapes
  uint32_t ssm_d_inner = 0;                                                    // the hybrid shapes
  // The recurrent layers' geometry and the layer pattern: the hybrid shapes and qwen35(moe).
  uint32_t ssm_n_head = 0, ssm_n_group = 0, ssm_d_state = 0, attention_every = 0;
  uint32_t window = 0;  // gpt-oss
  uint64_t seed = 0;
  // A GGUF whose tokenizer the model takes, "bytes" for the byte vocabulary; empty: the default
  // (DefaultTokenizerPath).
  std::string tokenizer;
};

// The default tokenizer: LLaMA's SentencePiece vocabulary (32000 tokens, the shapes' vocabulary size), from
// the project's reference files, so that English text costs about as many tokens as in a real model (the
// byte vocabulary makes it about 7 a word). Looked for under $LLAMAY_SHARED_DIR, ../shared from the current
// directory, and ../shared from the checkout the binary was built in (build/<preset>/bin/llamay). Empty when
// none is found.
std::string DefaultTokenizerPath() {
  namespace fs = std::filesystem;
  const fs::path rel = fs::path("ref") / "vocab" / "ggml-vocab-llama-spm.gguf";
  std::vector<fs::path> shared;
  if (const char* env = std::getenv("LLAMAY_SHARED_DIR"); env != nullptr && *env != '\0')
    shared.emplace_back(env);
  shared.emplace_back(fs::path("..") / "shared");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) shared.push_back(exe.parent_path() / ".." / ".." / ".." / ".." / "shared");
  for (const fs::path& dir : shared)
    if (fs::is_regular_file(dir / rel, ec)) return (dir / rel).lexically_normal().string();
  return "";
}

// The tokenizer file for `o`, opened, or nullopt for the byte vocabulary; `what` says which, for the output.
Result<std::optional<gguf::File>> OpenTokenizer(const SynthOptions& o, std::string* what) {
  std::string path = o.tokenizer;
  if (path == "bytes" || (path.empty() && o.n_vocab != 0)) {
    *what = "byte vocabulary";
    return std::optional<gguf::File>();
  }
  if (path.empty()) {
    path = DefaultTokenizerPath();
    if (path.empty()) {
      std::fprintf(
          stderr,
          "note: no reference vocabulary found (../shared/ref/vocab/ggml-vocab-llama-spm.gguf); writing "
          "the byte vocabulary, about 7 tokens a word (--tokenizer FILE to give one)\n");
      *what = "byte vocabulary";
      return std::optional<gguf::File>();
    }
  }
  auto f = gguf::File::Open(path);
  if (!f.ok()) {
    std::string msg = "--tokenizer: ";
    msg.append(f.status().message());
    return InvalidArgumentError(msg);
  }
  *what = "tokenizer of " + std::filesystem::path(path).filename().string();
  return std::optional<gguf::File>(std::move(*f));
}

Result<model::SyntheticSpec> SpecFor(const SynthOptions& o, TensorType type) {
  model::SyntheticSpec s;
  if (o.shape == "peer") {
    s = model::PeerShape(type);
  } else if (o.shape == "hybrid") {
    s = model::HybridShape(type);
  } else if (o.shape == "hybrid-moe") {
    s = model::HybridMoeShape(type);
  } else if (o.shape == "qwen35") {
    s = model::Qwen35Shape(type);
  } else if (o.shape == "qwen35moe") {
    s = model::Qwen35MoeShape(type);
  } else if (o.shape == "qwen3moe") {
    s = model::Qwen3MoeShape(type);
  } else if (o.shape == "qwen2moe") {
    s = model::Qwen2MoeShape(type);
  } else if (o.shape == "olmoe") {
    s = model::OlmoeShape(type);
  } else if (o.shape == "gpt-oss") {
    s = model::GptOssShape(type);
  } else {
    std::string msg =
        "--shape must be peer, hybrid, hybrid-moe, qwen35, qwen35moe, qwen3moe, qwen2moe, olmoe or gpt-oss, "
        "got '";
    msg.append(o.shape).append("'");
    return InvalidArgumentError(msg);
  }
  const bool moe = s.arch == model::SyntheticArch::kQwen3Moe || s.arch == model::SyntheticArch::kQwen2Moe ||
                   s.arch == model::SyntheticArch::kGptOss || s.arch == model::SyntheticArch::kOlmoe ||
                   s.arch == model::SyntheticArch::kQwen35Moe || s.granite_experts;
  const bool qwen35 = s.arch == model::SyntheticArch::kQwen35 || s.arch == model::SyntheticArch::kQwen35Moe;
  const bool recurrent = qwen35 || s.arch == model::SyntheticArch::kGraniteHybrid;
  if (!moe && (o.n_expert || o.n_expert_used || o.n_ff_expert || o.n_ff_shared))
    return InvalidArgumentError(
        "--experts, --experts-used, --expert-ffn and --shared-ffn are for the MoE shapes "
        "(hybrid-moe, qwen35moe, qwen3moe, qwen2moe, olmoe, gpt-oss)");
  if (!moe && !qwen35 && o.head_dim)
    return InvalidArgumentError(
        "--head-dim is for the MoE shapes (hybrid-moe, qwen35moe, qwen3moe, qwen2moe, olmoe, gpt-oss) "
        "and qwen35");
  if (!recurrent && (o.ssm_n_head || o.ssm_n_group || o.ssm_d_state || o.attention_every))
    return InvalidArgumentError(
        "--ssm-heads, --ssm-groups, --ssm-state and --attention-every are for the shapes with recurrent "
        "layers "
        "(hybrid, hybrid-moe, qwen35, qwen35moe)");
  if (o.window != 0 && s.arch != model::SyntheticArch::kGptOss)
    return InvalidArgumentError("--window is for the gpt-oss shape");
  auto set = [](uint32_t v, uint32_t& field) {
    if (v != 0) field = v;
  };
  set(o.n_vocab, s.n_vocab);
  set(o.n_embd, s.n_embd);
  set(o.n_layer, s.n_layer);
  set(o.n_head, s.n_head);
  set(o.n_head_kv, s.n_head_kv);
  set(o.n_ff, s.n_ff);
  set(o.head_dim, s.head_dim);
  set(o.n_expert, s.n_expert);
  set(o.n_expert_used, s.n_expert_used);
  set(o.n_ff_expert, s.n_ff_expert);
  set(o.n_ff_shared, s.n_ff_shared);
  set(o.window, s.window);
  // Not for qwen35: llama.cpp reads the delta net's value head size from ssm.state_size, so its width is
  // fixed by the heads (16 of 128).
  if (o.ssm_d_inner != 0 && s.arch != model::SyntheticArch::kGraniteHybrid)
    return InvalidArgumentError("--ssm-inner is for the hybrid shapes (hybrid, hybrid-moe)");
  set(o.ssm_d_inner, s.ssm_d_inner);
  set(o.ssm_n_head, s.ssm_n_head);
  set(o.ssm_n_group, s.ssm_n_group);
  set(o.ssm_d_state, s.ssm_d_state);
  set(o.attention_every, s.attention_every);
  if (qwen35) s.ssm_d_inner = s.ssm_n_head * s.ssm_d_state;  // value heads as wide as key heads
  if (o.seed != 0) s.seed = o.seed;
  if (!o.name.empty()) s.name = o.name;
  return s;
}

Status WriteOne(const SynthOptions& o, TensorType type, const std::string& path) {
  auto spec = SpecFor(o, type);
  if (!spec.ok()) return spec.status();
  std::string vocabulary;
  auto tokenizer = OpenTokenizer(o, &vocabulary);
  if (!tokenizer.ok()) return tokenizer.status();
  if (tokenizer->has_value()) {
    spec->tokenizer = &**tokenizer;
    // The vocabulary's size unless --vocab says otherwise (a mismatch is then refused).
    if (o.n_vocab == 0) {
      auto n = spec->tokenizer->ArrayLength("tokenizer.ggml.tokens");
      if (!n.ok()) return InvalidArgumentError("--tokenizer: the file has no tokenizer.ggml.tokens");
      spec->n_vocab = static_cast<uint32_t>(*n);
    }
  }
  auto bytes = model::BuildSyntheticModel(*spec);
  if (!bytes.ok()) return bytes.status();
  LLAMAY_RETURN_IF_ERROR(WriteFileAtomic(path, *bytes));
  std::printf("wrote %s (%s, %s, %s, %s: %u tokens)\n", path.c_str(), spec->name.c_str(),
              std::string(TensorTypeName(type)).c_str(), FormatBytes(bytes->size()).c_str(),
              vocabulary.c_str(), spec->n_vocab);
  return Status::Ok();
}

// A shape the type cannot hold, or a bad option, is the user's error (exit 2); I/O failures exit 1.
int SynthFailure(const Status& s) {
  return Fail(s, s.code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailure);
}

int RunSynth(const SynthOptions& o) {
  if (o.type != "all") {
    auto type = ParseWeightType(o.type);
    if (!type.ok()) return Fail(type.status(), kExitBadInput);
    Status s = WriteOne(o, *type, o.output);
    return s.ok() ? kExitOk : SynthFailure(s);
  }
  // -o names a directory; each file is <shape>-<type>.gguf inside it.
  for (TensorType t : kAllTypes) {
    const std::string path = o.output + "/" + o.shape + "-" + std::string(TensorTypeName(t)) + ".gguf";
    Status s = WriteOne(o, t, path);
    if (!s.ok()) return SynthFailure(s);
  }
  return kExitOk;
}

}  // namespace

Result<TensorType> ParseWeightType(const std::string& name) {
  auto t = TensorTypeFromName(name);
  if (!t || !kernels::CanQuantize(*t))
    return InvalidArgumentError("unknown or unsupported weight type '" + name +
                                "' (f32, f16, bf16, q8_0, q5_0, q5_1, q4_0, q4_1, q6_K, q5_K, q4_K, iq4_nl, "
                                "iq4_xs, mxfp4, q3_K, q2_K)");
  return *t;
}

void AddModelFileCommands(CLI::App& model_cmd, int* exit_code) {
  auto demo_out = std::make_shared<std::string>();
  CLI::App* demo =
      model_cmd.add_subcommand("demo", "Write the built-in demo model (synthetic weights) as GGUF");
  demo->add_option("-o,--output", *demo_out, "Destination file")->required();
  demo->callback([demo_out, exit_code] {
    Status s = model::WriteDemoModel(*demo_out);
    *exit_code = s.ok() ? kExitOk : Fail(s, kExitFailure);
    if (s.ok()) std::printf("wrote %s (%s)\n", demo_out->c_str(), model::kDemoModelName);
  });

  auto o = std::make_shared<SynthOptions>();
  CLI::App* c = model_cmd.add_subcommand(
      "synth", "Write a GGUF model of a given shape with deterministic synthetic weights (for benchmarks)");
  c->add_option("-o,--output", o->output, "Destination file (with --type all: an existing directory)")
      ->required();
  c->add_option("--type", o->type, "Weight type (f16, q8_0, q4_0, q4_K, ...) or 'all'")
      ->capture_default_str();
  c->add_option(
       "--shape", o->shape,
       "peer: llama, vocab 32000, dim 1024, 8 layers, 16/8 heads, ffn 2816 (160M); hybrid: granitehybrid "
       "290M (every 4th layer attention, the rest Mamba-2); hybrid-moe: hybrid with Granite 4.0-H Tiny's "
       "experts (64 of "
       "512, 6 used, a shared expert of 1024); qwen35: Qwen3.5-0.8B's layer (dim 1024, every 4th layer "
       "gated attention of 8/2 heads of 256 with 64 rotated dims, the others gated delta nets of 16 key and "
       "16 value heads of 128, ffn 3584), 16 layers; qwen35moe: Qwen3.5-35B-A3B's layer (dim 2048, every 4th "
       "layer gated attention of 16/2 heads of 256, the others gated delta nets of 16 key and 32 value heads "
       "of "
       "128; 256 experts of 512, 8 used, a gated shared expert of 512), 4 layers; qwen3moe: Qwen3-30B-A3B's "
       "layer (dim 2048, "
       "32/4 heads of 128, 128 experts of 768, 8 used), 8 layers; qwen2moe: Qwen1.5-MoE-A2.7B's layer (dim "
       "2048, "
       "16 heads of 128, 60 experts of 1408, 4 used, a shared expert of 5632), 8 layers; olmoe: "
       "OLMoE-1B-7B's layer (dim 2048, 16 heads of 128 with whole-row q/k norms, 64 experts of "
       "1024, 8 used), 8 layers; gpt-oss: gpt-oss-20b's layer "
       "(dim 2880, 64/8 heads of 64, 32 experts of 2880, 4 used, sinks, window 128 on even layers, YaRN), 6 "
       "layers")
      ->capture_default_str();
  c->add_option("--name", o->name, "general.name of the file (default: the shape's)");
  c->add_option(
      "--vocab", o->n_vocab,
      "Vocabulary size (default: the shape's, or the tokenizer's); alone, it implies --tokenizer bytes");
  c->add_option(
      "--tokenizer", o->tokenizer,
      "A GGUF whose tokenizer to copy (vocabulary, scores or merges, special tokens), or 'bytes' for the "
      "byte vocabulary (about 7 tokens a word). Default: ../shared/ref/vocab/ggml-vocab-llama-spm.gguf "
      "(LLaMA's 32000 tokens) when found ($LLAMAY_SHARED_DIR, ../shared, or beside the checkout), "
      "else bytes");
  c->add_option("--dim", o->n_embd, "Embedding width (default: the shape's)");
  c->add_option("--layers", o->n_layer, "Layers (default: the shape's)");
  c->add_option("--heads", o->n_head, "Attention heads (default: the shape's)");
  c->add_option("--kv-heads", o->n_head_kv, "KV heads (default: the shape's)");
  c->add_option("--ffn", o->n_ff, "FFN width (default: the shape's)");
  c->add_option("--head-dim", o->head_dim,
                "MoE shapes and qwen35: attention head width (default: the shape's)");
  c->add_option("--experts", o->n_expert, "MoE shapes: experts per layer (default: the shape's)");
  c->add_option("--experts-used", o->n_expert_used, "MoE shapes: experts per token (default: the shape's)");
  c->add_option("--expert-ffn", o->n_ff_expert, "MoE shapes: each expert's FFN width (default: the shape's)");
  c->add_option(
      "--ssm-inner", o->ssm_d_inner,
      "hybrid shapes: the Mamba-2 layers' inner width (default: the shape's; llama.cpp wants 2 x --dim)");
  c->add_option("--shared-ffn", o->n_ff_shared,
                "qwen2moe, qwen35moe, hybrid-moe: the shared expert's FFN width (default: the shape's)");
  c->add_option(
      "--ssm-heads", o->ssm_n_head,
      "hybrid shapes: Mamba-2 heads; qwen35(moe): the delta nets' value heads (default: the shape's)");
  c->add_option(
      "--ssm-groups", o->ssm_n_group,
      "hybrid shapes: Mamba-2 groups; qwen35(moe): the delta nets' key heads, dividing the value heads "
      "(default: the shape's)");
  c->add_option(
      "--ssm-state", o->ssm_d_state,
      "hybrid shapes: Mamba-2 state size; qwen35(moe): the delta nets' head width (default: the shape's)");
  c->add_option(
      "--attention-every", o->attention_every,
      "hybrid shapes and qwen35(moe): every Nth layer is attention, the others recurrent (default 4)");
  c->add_option("--window", o->window,
                "gpt-oss: the even layers' sliding window (default: the shape's, 128)");
  c->add_option("--seed", o->seed, "Weight seed (default: the shape's)");
  c->callback([o, exit_code] { *exit_code = RunSynth(*o); });
}

}  // namespace llamay::cli
