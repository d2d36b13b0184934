#include "ctx_store_commands.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/file.h"
#include "ctx_commands.h"
#include "engine/snapshot_store.h"
#include "format.h"
#include "kv/snapshot.h"

namespace llamay::cli {
namespace {

struct StoreArgs {
  std::string store, name, file, model_digest;
  bool json = false;
};

// Store failures: bad names and URLs are the user's (2), everything else (unreachable, refused, damaged
// in the store) a failed operation (1).
int FailStore(const Status& s) {
  return Fail(s, s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ? kExitBadInput
                                                                                                : kExitFailure);
}

Result<std::unique_ptr<engine::SnapshotStore>> Open(const std::string& url) {
  LLAMAY_ASSIGN_OR_RETURN(std::unique_ptr<store::Store> s, store::OpenStore(url));
  return std::make_unique<engine::SnapshotStore>(std::move(s));
}

Result<Digest> ParseDigest(const std::string& hex) {
  auto d = DigestFromHex(hex);
  if (!d) return InvalidArgumentError("--model-digest takes the 64 hex digits ctx ls prints");
  return *d;
}

int RunPush(const StoreArgs& a) {
  auto bytes = ReadFile(a.file);
  if (!bytes.ok()) return Fail(bytes.status(), kExitBadInput);
  const std::string name = a.name.empty() ? std::filesystem::path(a.file).stem().string() : a.name;
  auto store = Open(a.store);
  if (!store.ok()) return FailStore(store.status());
  auto pushed = (*store)->Push(name, *bytes);
  if (!pushed.ok()) {
    if (kv::SnapshotErrorOf(pushed.status()) != kv::SnapshotError::kNone) return FailSnapshot(a.file, pushed.status());
    return FailStore(pushed.status());
  }
  if (a.json) {
    std::printf("%s\n", nlohmann::json{{"name", name},
                                       {"store", (*store)->Describe()},
                                       {"bytes", pushed->bytes},
                                       {"chunks", pushed->chunks},
                                       {"chunks_sent", pushed->chunks_sent},
                                       {"bytes_sent", pushed->bytes_sent}}
                            .dump()
                            .c_str());
  } else {
    std::printf("pushed %s as '%s' to %s: %zu of %zu chunks sent (%s of %s)\n", a.file.c_str(), name.c_str(),
                (*store)->Describe().c_str(), pushed->chunks_sent, pushed->chunks, FormatBytes(pushed->bytes_sent).c_str(),
                FormatBytes(pushed->bytes).c_str());
  }
  return kExitOk;
}

int RunPull(const StoreArgs& a) {
  auto store = Open(a.store);
  if (!store.ok()) return FailStore(store.status());
  // The model: given, or the one model in the store that has a snapshot of this name.
  Digest weights{};
  if (!a.model_digest.empty()) {
    auto d = ParseDigest(a.model_digest);
    if (!d.ok()) return Fail(d.status(), kExitBadInput);
    weights = *d;
  } else {
    auto models = (*store)->Models();
    if (!models.ok()) return FailStore(models.status());
    int found = 0;
    for (const Digest& m : *models) {
      auto list = (*store)->List(m);
      if (!list.ok()) return FailStore(list.status());
      for (const auto& s : *list)
        if (s.name == a.name) {
          weights = m;
          ++found;
        }
    }
    if (found == 0) return Fail(NotFoundError("no snapshot '" + a.name + "' in " + (*store)->Describe()), kExitBadInput);
    if (found > 1)
      return Fail(InvalidArgumentError("several models have a snapshot '" + a.name + "': give --model-digest"), kExitBadInput);
  }
  auto bytes = (*store)->PullBytes(weights, a.name);
  if (!bytes.ok()) return FailStore(bytes.status());
  // The reassembled file carries its own checksum: verified before it is written.
  auto info = kv::InspectSnapshot(*bytes);
  if (!info.ok()) return FailSnapshot(a.name, info.status());
  const std::string out = a.file.empty() ? a.name + ".llamayctx" : a.file;
  if (Status s = WriteFileAtomic(out, *bytes); !s.ok()) return Fail(s, kExitFailure);
  std::printf("pulled '%s' from %s into %s (%s, %llu positions)\n", a.name.c_str(), (*store)->Describe().c_str(),
              out.c_str(), FormatBytes(bytes->size()).c_str(), static_cast<unsigned long long>(info->n_positions));
  return kExitOk;
}

int RunLs(const StoreArgs& a) {
  auto store = Open(a.store);
  if (!store.ok()) return FailStore(store.status());
  auto models = (*store)->Models();
  if (!models.ok()) return FailStore(models.status());
  nlohmann::json all = nlohmann::json::array();
  for (const Digest& m : *models) {
    auto list = (*store)->List(m);
    if (!list.ok()) return FailStore(list.status());
    for (const auto& s : *list) {
      if (a.json) {
        all.push_back({{"name", s.name}, {"model_digest", DigestHex(m)}});
      } else {
        std::printf("%-40s model %s\n", s.name.c_str(), DigestHex(m).c_str());
      }
    }
  }
  if (a.json) std::printf("%s\n", all.dump().c_str());
  return kExitOk;
}

}  // namespace

void AddCtxStoreCommands(CLI::App& ctx, int* exit_code) {
  auto push = std::make_shared<StoreArgs>();
  CLI::App* p = ctx.add_subcommand("push", "Store a snapshot file (only the chunks the store lacks are sent)");
  p->add_option("-i,--input", push->file, "Snapshot file")->required();
  p->add_option("--store", push->store, "A directory, or s3://bucket/prefix (docs/store.md)")->required();
  p->add_option("--name", push->name, "Name in the store (default: the file's name without its extension)");
  p->add_flag("--json", push->json, "One JSON object on stdout");
  p->callback([push, exit_code] { *exit_code = RunPush(*push); });

  auto pull = std::make_shared<StoreArgs>();
  CLI::App* l = ctx.add_subcommand("pull", "Fetch a snapshot from a store into a file (verified before it is written)");
  l->add_option("--store", pull->store, "A directory, or s3://bucket/prefix")->required();
  l->add_option("--name", pull->name, "Name in the store")->required();
  l->add_option("-o,--output", pull->file, "Destination (default: NAME.llamayctx)");
  l->add_option("--model-digest", pull->model_digest, "Which model's snapshot, when several share the name (ctx ls)");
  l->callback([pull, exit_code] { *exit_code = RunPull(*pull); });

  auto ls = std::make_shared<StoreArgs>();
  CLI::App* s = ctx.add_subcommand("ls", "List the snapshots in a store, with the model that computed each");
  s->add_option("--store", ls->store, "A directory, or s3://bucket/prefix")->required();
  s->add_flag("--json", ls->json, "A JSON list on stdout");
  s->callback([ls, exit_code] { *exit_code = RunLs(*ls); });
}

}  // namespace llamay::cli
