#include "model/demo_model.h"

#include "base/file.h"
#include "model/synthetic_model.h"

namespace llamay::model {

namespace {
SyntheticSpec DemoSpec() {
  SyntheticSpec s;
  s.name = kDemoModelName;
  s.n_vocab = 3 + 96;
  s.n_embd = 256;
  s.n_layer = 4;
  s.n_head = 8;
  s.n_head_kv = 4;
  s.n_ff = 768;
  s.type = TensorType::kQ8_0;
  s.ascii_bytes_only = true;
  return s;
}
}  // namespace

std::vector<uint8_t> BuildDemoModel() {
  auto bytes = BuildSyntheticModel(DemoSpec());
  LLAMAY_CHECK(bytes.ok()) << bytes.status().ToString();
  return std::move(*bytes);
}

Status WriteDemoModel(const std::string& path) { return WriteFileAtomic(path, BuildDemoModel()); }

}  // namespace llamay::model
