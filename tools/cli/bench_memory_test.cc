// DecodeWeightBytes: what one decode step reads, the figure `llamay bench`'s "of bw" column divides by.
#include "bench_memory.h"

#include <gtest/gtest.h>

#include "model/synthetic_model.h"

namespace llamay::cli {
namespace {

// A dense model reads every tensor but one row of the embedding; a mixture of experts reads, of each expert
// tensor (weights and biases), the slabs of the expert_used_count experts a token chose, and everything else
// whole. Both against the file's own tensor list, summed independently here.
TEST(DecodeWeightBytes, ReadsTheChosenExpertsOnly) {
  for (const model::SyntheticArch arch : {model::SyntheticArch::kLlama, model::SyntheticArch::kGptOss}) {
    model::SyntheticSpec s = arch == model::SyntheticArch::kLlama ? model::PeerShape(TensorType::kQ8_0)
                                                                  : model::GptOssShape(TensorType::kQ8_0, 2);
    s.n_vocab = 512;
    s.n_embd = 128;
    s.n_layer = 2;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = 32;
    s.n_ff = 256;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_expert = 64;
    auto bytes = model::BuildSyntheticModel(s);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    auto f = gguf::File::FromBuffer(std::move(*bytes));
    ASSERT_TRUE(f.ok());
    uint64_t all = 0, experts = 0, embd_row = 0;
    for (const auto& t : f->tensors()) {
      all += t.n_bytes;
      if (t.name.find("_exps.") != std::string::npos) experts += t.n_bytes;
      if (t.name == "token_embd.weight") embd_row = t.n_bytes / static_cast<uint64_t>(t.rows());
    }
    const uint64_t embd = f->FindTensor("token_embd.weight")->n_bytes;
    if (arch == model::SyntheticArch::kLlama) {
      EXPECT_EQ(experts, 0u);
      EXPECT_EQ(DecodeWeightBytes(*f), all - embd + embd_row);
    } else {
      ASSERT_GT(experts, 0u);
      EXPECT_EQ(DecodeWeightBytes(*f), all - embd + embd_row - experts + experts / 8 * 2);
    }
  }
}

}  // namespace
}  // namespace llamay::cli
