// Enforces DESIGN.md's layering: each library includes project headers only from the layers below it.
// kv/ in particular sees nothing of models, requests or JSON.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

// Project folders each library may include from (besides its own).
const std::map<std::string, std::set<std::string>> kAllowed = {
    {"base", {}},
    {"kv", {"base"}},
    {"gguf", {"base"}},
    {"kernels", {"base"}},
    {"tokenizer", {"base", "gguf"}},
    {"sampling", {"base"}},
    {"template", {"base"}},
    {"grammar", {"base"}},
    {"toolcall", {"base", "grammar"}},
    {"model", {"base", "kv", "gguf", "kernels"}},
    {"store", {"base"}},
    {"engine", {"base", "kv", "gguf", "kernels", "model", "tokenizer", "sampling", "template", "store", "grammar"}},
    // Not yet the public API alone (DESIGN.md's aim), but never the kernels.
    {"server", {"base", "kv", "gguf", "model", "tokenizer", "sampling", "template", "grammar", "toolcall", "store", "engine"}},
};

// For a line `#include "dir/file.h"`, "dir"; otherwise "".
std::string IncludedFolder(const std::string& line) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || line[i] != '#') return "";
  i = line.find_first_not_of(" \t", i + 1);
  if (i == std::string::npos || line.compare(i, 7, "include") != 0) return "";
  const size_t open = line.find('"', i + 7);
  if (open == std::string::npos) return "";
  const size_t slash = line.find('/', open + 1), close = line.find('"', open + 1);
  if (slash == std::string::npos || close == std::string::npos || slash > close) return "";
  return line.substr(open + 1, slash - open - 1);
}

// Violations in one folder: "file: #include line".
std::vector<std::string> Violations(const std::string& layer) {
  const fs::path root = fs::path(LLAMAY_SOURCE_DIR) / "src";
  std::vector<std::string> out;
  std::set<std::string> project_dirs;
  for (auto& e : fs::directory_iterator(root))
    if (e.is_directory()) project_dirs.insert(e.path().filename().string());
  if (!fs::exists(root / layer)) return out;
  for (auto& e : fs::recursive_directory_iterator(root / layer)) {
    if (!e.is_regular_file()) continue;
    const auto ext = e.path().extension();
    if (ext != ".h" && ext != ".cc") continue;
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line)) {
      const std::string dir = IncludedFolder(line);
      if (dir.empty()) continue;
      if (dir == layer || !project_dirs.count(dir)) continue;
      if (!kAllowed.at(layer).count(dir)) out.push_back(e.path().filename().string() + ": " + line);
    }
  }
  return out;
}

TEST(Layering, EachLibraryIncludesOnlyLowerLayers) {
  for (const auto& [layer, allowed] : kAllowed) {
    auto v = Violations(layer);
    EXPECT_TRUE(v.empty()) << layer << "/ includes outside its layers:\n  " << ::testing::PrintToString(v);
  }
}

TEST(Layering, KvSeesOnlyBaseAndItself) {
  // Stated on its own because it is the rule the state engine's design rests on.
  EXPECT_EQ(kAllowed.at("kv"), std::set<std::string>{"base"});
  EXPECT_TRUE(Violations("kv").empty());
}

}  // namespace
