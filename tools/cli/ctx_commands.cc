#include "ctx_commands.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "base/file.h"
#include "ctx_model_commands.h"
#include "ctx_store_commands.h"
#include "fork_report.h"
#include "format.h"
#include "kv/cache.h"
#include "kv/snapshot.h"
#include "llamay/llamay.h"

namespace llamay::cli {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct DemoOptions {
  size_t tokens = 46;
  size_t branches = 8;
  uint32_t page_tokens = 64;
  std::string precision = "f16";
  std::string output;
  bool json = false;
};

// A value for (pos, layer, kind, element) that depends on nothing else: the demo's "model".
float SyntheticValue(size_t pos, uint32_t layer, int kind, size_t i) {
  uint64_t x = pos * 0x9E3779B97F4A7C15ull ^ (uint64_t{layer} << 40) ^ (uint64_t(kind) << 56) ^ i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<float>(static_cast<int64_t>(x % 2001) - 1000) / 256.0f;
}

kv::KvLayout DemoLayout(uint32_t page_tokens, kv::KvPrecision p) {
  kv::KvLayout l;  // the KV shape of the 160M peer model in ../shared/ref/README.md
  l.n_layers = 8;
  l.n_kv_heads = 8;
  l.head_dim = 64;
  l.page_tokens = page_tokens;
  l.precision = p;
  return l;
}

Status FillSynthetic(kv::Context& c, size_t n) {
  std::vector<int32_t> toks(n);
  for (size_t i = 0; i < n; ++i) toks[i] = static_cast<int32_t>(i % 512);
  LLAMAY_RETURN_IF_ERROR(c.Append(toks));
  const kv::KvLayout& l = c.layout();
  std::vector<float> row(l.row_elems());
  for (size_t p = 0; p < n; ++p)
    for (uint32_t layer = 0; layer < l.n_layers; ++layer)
      for (int k = 0; k < 2; ++k) {
        for (size_t i = 0; i < row.size(); ++i) row[i] = SyntheticValue(p, layer, k, i);
        LLAMAY_RETURN_IF_ERROR(c.WriteRow(p, layer, static_cast<kv::KvKind>(k), row));
      }
  return Status::Ok();
}

bool SameValues(const kv::Context& a, const kv::Context& b) {
  if (a.tokens() != b.tokens()) return false;
  const kv::KvLayout& l = a.layout();
  std::vector<float> ra(l.row_elems()), rb(l.row_elems());
  for (size_t p = 0; p < a.size(); ++p)
    for (uint32_t layer = 0; layer < l.n_layers; ++layer)
      for (kv::KvKind k : {kv::KvKind::kKey, kv::KvKind::kValue}) {
        if (!a.ReadRow(p, layer, k, ra).ok() || !b.ReadRow(p, layer, k, rb).ok()) return false;
        if (std::memcmp(ra.data(), rb.data(), ra.size() * 4) != 0) return false;
      }
  return true;
}

// Forks `source` n ways into *branches, timing the fork and reading the cache's counters before and after.
ForkReport MeasureFork(const kv::Context& source, size_t n, std::string label, std::vector<kv::Context>* branches) {
  kv::Cache& cache = *source.cache();
  ForkReport r;
  r.source = std::move(label);
  r.tokens = source.size();
  r.pages = source.n_pages();
  r.source_bytes = source.bytes();
  r.branches = n;
  const kv::CacheStats before = cache.Stats();
  const auto t0 = Clock::now();
  *branches = source.Fork(n);
  r.fork_seconds = Seconds(t0, Clock::now());
  const kv::CacheStats after = cache.Stats();
  r.pages_allocated = after.pages_allocated_total - before.pages_allocated_total;
  r.pages_live_before = before.pages_live;
  r.pages_live_after = after.pages_live;
  r.page_bytes = after.page_bytes;
  return r;
}

int RunDemo(const DemoOptions& o) {
  auto precision = kv::ParseKvPrecision(o.precision);
  if (!precision.ok()) return Fail(precision.status(), kExitBadInput);
  if (o.tokens == 0 || o.tokens > kv::kMaxPositions)
    return Fail(InvalidArgumentError("--tokens must be 1.." + std::to_string(kv::kMaxPositions)), kExitBadInput);
  kv::CacheOptions co;
  co.layout = DemoLayout(o.page_tokens, *precision);
  auto cache = kv::Cache::Create(co);
  if (!cache.ok()) return Fail(cache.status(), kExitBadInput);
  kv::Context source = (*cache)->NewContext();
  if (Status s = FillSynthetic(source, o.tokens); !s.ok()) return Fail(s, kExitFailure);

  std::vector<kv::Context> branches;
  const ForkReport fork = MeasureFork(source, o.branches, "synthetic", &branches);

  // Snapshot, then restore into a cache with twice the page size: position-major makes that work.
  std::string path = o.output;
  const bool keep = !path.empty();
  if (!keep) path = (std::filesystem::temp_directory_path() / ("llamay-demo-" + std::to_string(::getpid()) + ".llamayctx")).string();
  Digest weights{};  // the synthetic layout's "weights": a fixed digest
  weights.fill(0x5A);
  const auto t1 = Clock::now();
  if (Status s = kv::SaveSnapshot(source, weights, path); !s.ok()) return Fail(s, kExitFailure);
  const double save_s = Seconds(t1, Clock::now());
  kv::CacheOptions co2 = co;
  co2.layout.page_tokens = o.page_tokens * 2;
  auto other = kv::Cache::Create(co2);
  if (!other.ok()) return Fail(other.status(), kExitBadInput);
  const auto t2 = Clock::now();
  auto restored = kv::LoadSnapshot(**other, path, weights);
  const double restore_s = Seconds(t2, Clock::now());
  if (!restored.ok()) return Fail(restored.status(), kExitFailure);
  const bool identical = SameValues(source, *restored);
  const uint64_t file_bytes = std::filesystem::file_size(path);
  if (!keep) std::filesystem::remove(path);

  if (o.json) {
    nlohmann::json j = ForkReportJson(fork);
    j["snapshot_bytes"] = file_bytes;
    j["snapshot_seconds"] = save_s;
    j["restore_seconds"] = restore_s;
    j["restore_page_tokens"] = co2.layout.page_tokens;
    j["restored_identical"] = identical;
    if (keep) j["snapshot"] = path;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("llamay ctx demo (synthetic KV of the peer model's shape: %s)\n\n", co.layout.ToString().c_str());
    PrintForkTable(fork);
    PrintRow("snapshot",
             FormatBytes(file_bytes) + " written in " + FormatDuration(save_s) + (keep ? " to " + path : ""));
    PrintRow("restore", FormatDuration(restore_s) + " into " + std::to_string(co2.layout.page_tokens) +
                            "-token pages, " + (identical ? "bit-identical" : "DIFFERENT"));
  }
  return identical ? kExitOk : kExitFailure;
}

// A version 2 file's layer map, one letter a layer: a (full attention), w (windowed), r (recurrent).
std::string LayerKinds(const kv::SnapshotInfo& info) {
  std::string k;
  for (const kv::LayerSpec& s : info.layer_specs) k += s.kind == kv::LayerKind::kRecurrent ? 'r' : (s.window ? 'w' : 'a');
  return k;
}

int RunInspect(const std::string& path, bool json) {
  auto bytes = ReadFile(path);
  if (!bytes.ok()) return Fail(bytes.status(), kExitBadInput);
  auto info = kv::InspectSnapshot(*bytes);
  if (!info.ok()) return FailSnapshot(path, info.status());
  uint32_t window = 0;
  for (const kv::LayerSpec& s : info->layer_specs) window = std::max(window, s.window);
  if (json) {
    nlohmann::json j = {{"file", path},
                        {"version", info->version},
                        {"positions", info->n_positions},
                        {"layers", info->n_layers},
                        {"kv_heads", info->n_kv_heads},
                        {"head_dim", info->head_dim},
                        {"precision", std::string(kv::KvPrecisionName(info->precision))},
                        {"weights", DigestHex(info->weights)},
                        {"bytes", info->file_bytes}};
    if (info->version >= 2) {
      j["layer_kinds"] = LayerKinds(*info);
      j["window"] = window;
      j["recurrent_state_position"] = info->state_position;
      j["checkpoints"] = info->n_checkpoints;
      j["logits"] = info->n_logits;
      j["kv_checksum_chunk"] = info->kv_checksum_chunk;
    }
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  PrintRow("file", path);
  PrintRow("format version", std::to_string(info->version));
  PrintRow("positions", std::to_string(info->n_positions));
  PrintRow("geometry", std::to_string(info->n_layers) + " layers x " + std::to_string(info->n_kv_heads) +
                           " kv heads x " + std::to_string(info->head_dim));
  PrintRow("precision on disk", std::string(kv::KvPrecisionName(info->precision)));
  if (info->version >= 2) {
    PrintRow("layers", LayerKinds(*info) + " (a attention, w window " + std::to_string(window) + ", r recurrent)");
    if (info->recurrent_layer_bytes != 0)
      PrintRow("recurrent state", "after " + std::to_string(info->state_position) + " positions, " +
                                      std::to_string(info->n_checkpoints) + " checkpoints");
    PrintRow("next-token logits", info->n_logits ? std::to_string(info->n_logits) + " stored" : "none");
    PrintRow("KV checksums", info->kv_checksum_chunk ? "one per " + FormatBytes(info->kv_checksum_chunk) : "none");
  }
  PrintRow("weights", DigestHex(info->weights));
  PrintRow("size", FormatBytes(info->file_bytes) + ", checksum ok");
  return kExitOk;
}

}  // namespace

int Fail(const Status& s, int code) {
  std::fprintf(stderr, "llamay: %s\n", s.ToString().c_str());
  return code;
}

int FailGeneration(const Status& s) {
  return Fail(s, s.code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailure);
}

int FailSnapshot(const std::string& path, const Status& s) {
  const std::string_view refusal = SnapshotRefusal(s);
  if (refusal.empty()) {
    const bool unreadable = s.code() == StatusCode::kNotFound || s.code() == StatusCode::kIoError ||
                            s.code() == StatusCode::kInvalidArgument;
    return Fail(s, unreadable ? kExitBadInput : kExitFailure);
  }
  const bool named = s.message().rfind(path + ": ", 0) == 0;  // LoadSnapshot names the file already
  std::fprintf(stderr, "llamay: %s%s (%s)\n", named ? "" : (path + ": ").c_str(), s.message().c_str(),
               std::string(refusal).c_str());
  if (refusal != "wrong_model") return kExitBadInput;
  std::fprintf(stderr, "llamay: this snapshot was computed by another model's weights; restore it with the "
                       "model that built it (-m)\n");
  return kExitWrongModel;
}

void AddCtxCommands(CLI::App& app, int* exit_code) {
  CLI::App* ctx = app.add_subcommand("ctx", "Build, fork, snapshot, restore and inspect contexts");
  ctx->require_subcommand(1);

  auto demo = std::make_shared<DemoOptions>();
  CLI::App* d = ctx->add_subcommand("demo", "Fork and snapshot a synthetic context (no model needed)");
  d->add_option("--tokens", demo->tokens, "Positions in the source context")->capture_default_str();
  d->add_option("-n,--branches", demo->branches, "Branches to fork")->capture_default_str();
  d->add_option("--page-tokens", demo->page_tokens, "Positions per page")->capture_default_str();
  d->add_option("--precision", demo->precision, "KV precision: f32, f16 or q8_0")->capture_default_str();
  d->add_option("-o,--output", demo->output, "Keep the snapshot at this path");
  d->add_flag("--json", demo->json, "Machine-readable output");
  d->callback([demo, exit_code] { *exit_code = RunDemo(*demo); });

  auto inspect_path = std::make_shared<std::string>();
  auto inspect_json = std::make_shared<bool>(false);
  CLI::App* i = ctx->add_subcommand("inspect", "Show a snapshot's header and verify its checksum");
  i->add_option("file", *inspect_path, "Snapshot file")->required();
  i->add_flag("--json", *inspect_json, "Machine-readable output");
  i->callback([inspect_path, inspect_json, exit_code] { *exit_code = RunInspect(*inspect_path, *inspect_json); });

  AddCtxModelCommands(*ctx, exit_code);
  AddCtxStoreCommands(*ctx, exit_code);
}

}  // namespace llamay::cli
