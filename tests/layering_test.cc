// Enforces DESIGN.md's layering: each library includes project headers only from the layers below it.
// kv/ in particular sees nothing of models, requests or JSON. The surfaces above the engine are held to
// it too: the server reaches state, models and sampling only through the engine, and the CLI's commands
// that generate or hold sessions (`run`, `ctx build|fork|restore`) use the public API alone.
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
    {"base", {"llamay"}},  // base/status.h forwards to the public llamay/status.h
    {"kv", {"base"}},
    {"gguf", {"base"}},
    {"kernels", {"base"}},
    {"tokenizer", {"base", "gguf"}},
    {"sampling", {"base"}},
    {"template", {"base"}},
    {"grammar", {"base"}},
    {"toolcall", {"base", "grammar"}},
    {"reasoning", {"base"}},
    {"model", {"base", "kv", "gguf", "kernels"}},
    {"store", {"base"}},
    // engine/api.cc implements the public API (include/llamay/llamay.h).
    {"engine",
     {"llamay", "base", "kv", "gguf", "kernels", "model", "tokenizer", "sampling", "template", "store", "grammar"}},
    // The engine's API (engine/), the text libraries it translates JSON with, and the store: never the
    // state, models, sampling or kernels themselves.
    {"server", {"base", "tokenizer", "template", "grammar", "toolcall", "reasoning", "store", "engine"}},
};

// What a library's tests may include besides: the fixtures they build (a demo model's GGUF).
const std::map<std::string, std::set<std::string>> kTestAllowed = {
    {"server", {"gguf", "model"}},
    {"toolcall", {"template"}},  // the real chat templates render the calls the parser reads back
};

bool IsTestFile(const std::string& name) {
  return name.find("_test.") != std::string::npos || name.find("_test_util.") != std::string::npos;
}

// tools/cli, file by file (a file not listed fails the test: decide where a new one belongs). Besides the
// CLI's own headers, which are listed here too.
const std::map<std::string, std::set<std::string>> kCliAllowed = {
    // Through the public API (include/llamay/llamay.h) alone: generation and sessions.
    {"model_commands.cc", {"base", "llamay"}},
    {"ctx_model_commands.cc", {"llamay"}},
    {"cli_engine.h", {"llamay"}},
    {"cli_engine.cc", {}},
    // The composition root of the server: it builds the engine and hands it to the server.
    {"serve_command.cc", {"base", "engine", "kernels", "server"}},
    // Tools below the engine by design: the state engine's synthetic demo and a snapshot file's header
    // (ctx demo|inspect), the store's files (ctx push|pull), the vocabulary alone (tokenize), model files
    // (model demo|synth; synth copies the tokenizer of another GGUF), and the model-level benchmark (llamay bench, like llama-bench).
    {"ctx_commands.cc", {"base", "kv", "llamay"}},
    {"ctx_store_commands.cc", {"base", "engine", "kv"}},
    {"tokenize_command.cc", {"gguf", "model", "tokenizer"}},
    {"synth_command.cc", {"base", "gguf", "kernels", "model"}},
    {"synth_command.h", {"base"}},
    {"bench_command.cc", {"kernels", "kv", "model"}},
    {"bench_memory.h", {"gguf"}},
    // Its test builds a synthetic mixture of experts to count what a decode step reads.
    {"bench_memory_test.cc", {"model"}},
    // Output, progress and the command table.
    {"ctx_commands.h", {"base"}},
    {"progress.h", {"base"}},
    {"progress.cc", {}},
    {"fork_report.h", {}},
    {"fork_report.cc", {}},
    {"format.h", {}},
    {"format.cc", {}},
    {"format_test.cc", {}},
    {"main.cc", {}},
    {"bench_command.h", {}},
    {"bench_memory.cc", {}},
    {"ctx_model_commands.h", {}},
    {"ctx_store_commands.h", {}},
    {"model_commands.h", {}},
    {"serve_command.h", {}},
    {"tokenize_command.h", {}},
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

// The project's include folders: src/'s libraries and include/'s public API ("llamay").
std::set<std::string> ProjectDirs() {
  std::set<std::string> dirs;
  for (const char* top : {"src", "include"})
    for (auto& e : fs::directory_iterator(fs::path(LLAMAY_SOURCE_DIR) / top))
      if (e.is_directory()) dirs.insert(e.path().filename().string());
  return dirs;
}

// Violations in one folder: "file: #include line".
std::vector<std::string> Violations(const std::string& layer) {
  const fs::path root = fs::path(LLAMAY_SOURCE_DIR) / "src";
  std::vector<std::string> out;
  const std::set<std::string> project_dirs = ProjectDirs();
  if (!fs::exists(root / layer)) return out;
  const auto tests = kTestAllowed.find(layer);
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
      if (kAllowed.at(layer).count(dir)) continue;
      if (tests != kTestAllowed.end() && IsTestFile(e.path().filename().string()) && tests->second.count(dir)) continue;
      out.push_back(e.path().filename().string() + ": " + line);
    }
  }
  return out;
}

// The same for tools/cli, by kCliAllowed.
std::vector<std::string> CliViolations() {
  const fs::path root = fs::path(LLAMAY_SOURCE_DIR) / "tools" / "cli";
  const std::set<std::string> project_dirs = ProjectDirs();
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
    const auto allowed = kCliAllowed.find(name);
    if (allowed == kCliAllowed.end()) {
      out.push_back(name + ": not in kCliAllowed");
      continue;
    }
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line)) {
      const std::string dir = IncludedFolder(line);
      if (!dir.empty() && project_dirs.count(dir) && !allowed->second.count(dir)) out.push_back(name + ": " + line);
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

TEST(Layering, TheCliGeneratesThroughThePublicApi) {
  auto v = CliViolations();
  EXPECT_TRUE(v.empty()) << "tools/cli includes outside its rules:\n  " << ::testing::PrintToString(v);
  // The commands that generate see only the public API (besides base/ for reading files).
  for (const char* f : {"model_commands.cc", "ctx_model_commands.cc"})
    for (const std::string& dir : kCliAllowed.at(f)) EXPECT_TRUE(dir == "llamay" || dir == "base") << f << ": " << dir;
}

TEST(Layering, KvSeesOnlyBaseAndItself) {
  // Stated on its own because it is the rule the state engine's design rests on.
  EXPECT_EQ(kAllowed.at("kv"), std::set<std::string>{"base"});
  EXPECT_TRUE(Violations("kv").empty());
}

}  // namespace
