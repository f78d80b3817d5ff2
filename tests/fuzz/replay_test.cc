// Replays the checked-in fuzz inputs through their targets' entries
// (fuzz_entries.h) in the ordinary build:
//  - tests/fuzz/corpus/<target>/: one test per target, every file in turn;
//  - tests/fuzz/regressions/<target>/: one test per file (each once crashed,
//    hung, allocated without bound or broke an invariant; it stays for good).
// A crash, an abort (a broken invariant) or an escaping exception fails the
// test; a clean return is the only pass. A regression written by hand may be
// a .textproto LowerRequest or Program: it is replayed in binary form, as
// the fuzzer would have produced it.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "ferry/file.h"
#include "ferry/v1/program.pb.h"
#include "gtest/gtest.h"
#include "passes/diagnostics.h"
#include "passes/proto_io.h"
#include "tests/fuzz/fuzz_entries.h"
#include "tests/fuzz/proto_mutator.h"
#include "tests/support/files.h"

namespace ferry::fuzz {
namespace {

namespace fs = std::filesystem;

const fs::path kFuzzDir = FERRY_FUZZ_DIR;

bool IsInput(const fs::directory_entry& file) {
  const std::string name = file.path().filename().string();
  return file.is_regular_file() && !name.starts_with(".") &&
         name != "README.md";
}

std::vector<fs::path> InputsIn(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& file : fs::directory_iterator(dir))
    if (IsInput(file)) files.push_back(file.path());
  std::sort(files.begin(), files.end());
  return files;
}

using testing_util::ReadFile;

// The bytes the target gets: the file's, or a .textproto's binary form.
std::string InputBytes(const fs::path& file) {
  std::string bytes = ReadFile(file);
  if (file.extension() != ".textproto") return bytes;
  v1::LowerRequest request;
  bool bare = false;
  absl::Status parsed =
      ParseRequest(bytes, FileFormat::kText, file.string(), &request, &bare);
  EXPECT_TRUE(parsed.ok()) << parsed;
  return request.SerializeAsString();
}

int Replay(const Target& target, const fs::path& file) {
  const std::string bytes = InputBytes(file);
  return target.entry(reinterpret_cast<const uint8_t*>(bytes.data()),
                      bytes.size());
}

// Only [A-Za-z0-9_], as gtest wants.
std::string TestName(std::string name) {
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

std::vector<std::string> TargetNames() {
  std::vector<std::string> names;
  for (const Target& target : Targets()) names.emplace_back(target.name);
  return names;
}

class FuzzCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(FuzzCorpus, EveryInputRunsCleanly) {
  const Target* target = FindTarget(GetParam());
  ASSERT_NE(target, nullptr);
  const std::vector<fs::path> files =
      InputsIn(kFuzzDir / "corpus" / GetParam());
  // An empty corpus would make this test pass vacuously.
  EXPECT_GE(files.size(), 10u) << "corpus/" << GetParam();
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    EXPECT_EQ(Replay(*target, file), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzCorpus,
                         ::testing::ValuesIn(TargetNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

struct Regression {
  std::string target;  // the directory's name
  fs::path path;
};

std::vector<Regression> Regressions() {
  std::vector<Regression> out;
  const fs::path root = kFuzzDir / "regressions";
  if (!fs::is_directory(root)) return out;
  for (const auto& dir : fs::directory_iterator(root)) {
    if (!dir.is_directory()) continue;
    for (const fs::path& file : InputsIn(dir.path()))
      out.push_back({dir.path().filename().string(), file});
  }
  std::sort(
      out.begin(), out.end(),
      [](const Regression& a, const Regression& b) { return a.path < b.path; });
  return out;
}

void PrintTo(const Regression& regression, std::ostream* out) {
  *out << regression.path;
}

class FuzzRegression : public ::testing::TestWithParam<Regression> {};

TEST_P(FuzzRegression, RunsCleanly) {
  const Regression& regression = GetParam();
  const Target* target = FindTarget(regression.target);
  ASSERT_NE(target, nullptr)
      << regression.path << ": the directory names no fuzz target";
  EXPECT_EQ(Replay(*target, regression.path), 0);
}

INSTANTIATE_TEST_SUITE_P(Inputs, FuzzRegression,
                         ::testing::ValuesIn(Regressions()),
                         [](const ::testing::TestParamInfo<Regression>& info) {
                           return TestName(info.param.target + "_" +
                                           info.param.path.filename().string());
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FuzzRegression);

// The structure-aware mutator keeps requests requests, and most of them
// still importable: that is what makes it reach validation and lowering.
TEST(ProtoMutator, MutantsOfTheConformanceSeedsStayRequests) {
  int mutants = 0, fallbacks = 0, importable = 0, changed = 0;
  for (const fs::path& file : InputsIn(kFuzzDir / "corpus" / "pipeline")) {
    if (!file.filename().string().starts_with("conformance_")) continue;
    const std::string seed = ReadFile(file);
    for (unsigned int i = 0; i < 20; ++i) {
      std::string buffer = seed;
      buffer.resize(seed.size() + 4096);
      const size_t size =
          MutateRequestBytes(reinterpret_cast<uint8_t*>(buffer.data()),
                             seed.size(), buffer.size(), i);
      ++mutants;
      if (size == 0) {  // emptied, or grown past the room: libFuzzer's turn
        ++fallbacks;
        continue;
      }
      buffer.resize(size);
      changed += buffer != seed ? 1 : 0;
      v1::LowerRequest request;
      bool bare = false;
      ASSERT_TRUE(
          ParseRequest(buffer, FileFormat::kBinary, "mutant", &request, &bare)
              .ok())
          << file << " seed " << i;
      Diagnostics diagnostics;
      ImportProgram(request.program(), diagnostics);
      importable += diagnostics.HasErrors() ? 0 : 1;
    }
  }
  ASSERT_GE(mutants, 200);
  EXPECT_LE(fallbacks, mutants / 20);
  EXPECT_GE(changed, mutants * 9 / 10);
  EXPECT_GE(importable, mutants / 4);
}

}  // namespace
}  // namespace ferry::fuzz
