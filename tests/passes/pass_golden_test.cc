// Per-pass goldens (tests/passes/golden/README.md). A case is
// golden/<pass>/<Case>.input.textproto (a LowerRequest; its first line is a
// comment saying what the case pins down) and <Case>.expected.txt. The test
// runs the pipeline's steps up to and including <pass>, calling the pass
// functions directly, and compares only what that pass establishes (its
// header's "Establishes"), rendered as text, with the expected file:
//  - normalize_layout: the layout of every value and constant-table entry
//    (and a fingerprint of the constants' bytes);
//  - partition: which nodes each delegation tag groups;
//  - lower: the methods' nodes and the lowered modules, without devices;
//  - place_and_copy: every value's device, the copies, in node order;
//  - plan_memory: the arenas and every value's placement in them;
// each with the diagnostics that pass itself reported (code, severity,
// nodes). So a change to one pass rewrites only that pass's goldens (and the
// conformance goldens, which pin the whole pipeline).
//
// An input may reuse a program of the conformance case table: a line
// "# program: tests/conformance/<case>/request.textproto" reads that request,
// and the rest of the file (options, say) is merged into it.
//
// FERRY_UPDATE_GOLDENS=1 rewrites the expected files (review the diff!).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "ferry/v1/program.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/lower.h"
#include "passes/normalize_layout.h"
#include "passes/partition.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "passes/place_and_copy.h"
#include "passes/plan_memory.h"
#include "passes/proto_io.h"
#include "passes/resource_limits.h"
#include "passes/validate.h"
#include "tests/support/files.h"
#include "tests/support/golden.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using testing_util::ReadFile;

const fs::path kSourceDir = FERRY_SOURCE_DIR;
const fs::path kGoldenDir = kSourceDir / "tests/passes/golden";
constexpr char kInputSuffix[] = ".input.textproto";
constexpr char kExpectedSuffix[] = ".expected.txt";

// --- Rendering -------------------------------------------------------------

std::string Join(const std::vector<int64_t>& values) {
  return absl::StrJoin(values, ",");
}

// "f32[4,4]", then the strides and offset when they are not contiguous.
std::string LayoutText(const TensorSpec& spec) {
  std::string s = absl::StrCat(std::string(DTypeName(spec.dtype)), "[",
                               Join(spec.sizes), "]");
  if (!spec.IsContiguous())
    absl::StrAppend(&s, " strides [", Join(spec.Strides()), "]");
  if (spec.storage_offset != 0)
    absl::StrAppend(&s, " offset ", spec.storage_offset);
  return s;
}

std::string Operands(const Method& method, const Node& node) {
  std::vector<std::string> names;
  ForEachOperand(
      node, [&](const ValueId& v) { names.push_back(method.ValueName(v)); });
  return absl::StrJoin(names, ", ");
}

// "t = aten::add.Tensor(a, b)": what the node is and reads, no spec.
std::string NodeText(const Method& method, const Node& node) {
  std::string s = absl::StrCat(node.name, " = ");
  switch (node.kind) {
    case NodeKind::kInput:
      absl::StrAppend(&s, "input ",
                      std::string(InputKindName(node.input_kind)));
      if (!node.target.empty()) absl::StrAppend(&s, " ", node.target.str());
      break;
    case NodeKind::kConstant:
      absl::StrAppend(&s, "constant ", node.target.str());
      break;
    case NodeKind::kCall:
      absl::StrAppend(&s, node.target.str(), "(", Operands(method, node), ")");
      if (node.at_load) absl::StrAppend(&s, " at_load");
      break;
    case NodeKind::kDelegate:
      absl::StrAppend(&s, "delegate ", node.target.str(), "(",
                      Operands(method, node), ")");
      break;
    case NodeKind::kGetItem:
      absl::StrAppend(&s, method.nodes[node.getitem_source].name, "[",
                      node.getitem_index, "]");
      break;
    case NodeKind::kOutput:
      absl::StrAppend(&s, "output(", Operands(method, node), ")");
      break;
  }
  return s;
}

// The node's tensor specs: its result, or each element of a tuple.
std::vector<const TensorSpec*> Specs(const Node& node) {
  std::vector<const TensorSpec*> specs;
  if (node.result == ResultKind::kTensor) specs.push_back(&node.tensor);
  if (node.result == ResultKind::kTuple)
    for (const TensorSpec& s : node.tuple) specs.push_back(&s);
  return specs;
}

// FNV-1a: a short, stable name for a constant's bytes.
std::string Fingerprint(const std::string& bytes) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016" PRIx64, h);
  return text;
}

// A constant's bytes: the values of a small f32 tensor, so that a reader
// can check a permutation; else their size and FNV-1a hash.
std::string DataText(const Constant& c) {
  const std::string& bytes = *c.data;
  if (c.spec.dtype == DType::kF32 && bytes.size() <= 16 * sizeof(float)) {
    std::vector<std::string> values;
    for (size_t i = 0; i + sizeof(float) <= bytes.size(); i += sizeof(float)) {
      float v;
      std::memcpy(&v, bytes.data() + i, sizeof(v));
      values.push_back(absl::StrCat(v));
    }
    return absl::StrCat("[", absl::StrJoin(values, ","), "]");
  }
  return absl::StrCat(bytes.size(), " bytes ", Fingerprint(bytes));
}

// normalize_layout: the layout of every value and every constant.
std::string RenderLayouts(const Program& program) {
  std::string out;
  for (const Constant& c : program.constants) {
    absl::StrAppend(&out, "constant ", c.name, ": ", LayoutText(c.spec));
    if (c.data.has_value()) absl::StrAppend(&out, " data ", DataText(c));
    absl::StrAppend(&out, "\n");
  }
  for (const Method& m : program.methods) {
    absl::StrAppend(&out, "method ", m.name, "\n");
    for (const Node& n : m.nodes) {
      std::vector<std::string> layouts;
      for (const TensorSpec* s : Specs(n)) layouts.push_back(LayoutText(*s));
      if (layouts.empty()) continue;
      absl::StrAppend(&out, "  ", n.name, ": ", absl::StrJoin(layouts, ", "),
                      "\n");
    }
  }
  return out;
}

// partition: the nodes each tag groups, groups in order of first node.
std::string RenderGroups(const Program& program) {
  std::string out;
  for (const Method& m : program.methods) {
    absl::StrAppend(&out, "method ", m.name, "\n");
    std::vector<std::pair<std::string, std::vector<std::string>>> groups;
    for (const Node& n : m.nodes) {
      if (n.delegation_tag.empty()) continue;
      auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
        return g.first == n.delegation_tag;
      });
      if (it == groups.end())
        it = groups.insert(groups.end(), {n.delegation_tag, {}});
      it->second.push_back(n.name);
    }
    if (groups.empty()) absl::StrAppend(&out, "  no groups\n");
    for (const auto& [tag, nodes] : groups)
      absl::StrAppend(&out, "  group ", tag, ": ", absl::StrJoin(nodes, " "),
                      "\n");
  }
  return out;
}

// lower: the methods' graphs and the lowered modules.
std::string RenderModules(const Program& program) {
  std::string out;
  for (const Method& m : program.methods) {
    absl::StrAppend(&out, "method ", m.name, "\n");
    for (const Node& n : m.nodes)
      absl::StrAppend(&out, "  ", NodeText(m, n), "\n");
  }
  for (const LoweredModule& module : program.modules) {
    absl::StrAppend(&out, "module ", module.id, " backend ", module.backend);
    for (const CompileSpec& spec : module.compile_specs)
      absl::StrAppend(&out, " ", spec.key, "=", spec.value);
    if (module.returns_tuple) absl::StrAppend(&out, " returns_tuple");
    absl::StrAppend(&out, "\n");
    std::vector<std::string> layouts;
    for (const TensorSpec& s : module.input_layouts)
      layouts.push_back(LayoutText(s));
    absl::StrAppend(&out, "  input_layouts: ", absl::StrJoin(layouts, "; "),
                    "\n");
    for (const Node& n : module.graph.nodes)
      absl::StrAppend(&out, "  ", NodeText(module.graph, n), "\n");
  }
  return out;
}

// place_and_copy: every node with the device of each value it defines.
std::string RenderPlacement(const Program& program) {
  std::string out;
  for (const Method& m : program.methods) {
    absl::StrAppend(&out, "method ", m.name, "\n");
    for (const Node& n : m.nodes) {
      absl::StrAppend(&out, "  ", NodeText(m, n));
      std::vector<std::string> devices;
      for (const TensorSpec* s : Specs(n))
        devices.push_back(s->device.ToString());
      if (n.result == ResultKind::kTensor)
        absl::StrAppend(&out, " @", devices[0]);
      if (n.result == ResultKind::kTuple)
        absl::StrAppend(&out, " @(", absl::StrJoin(devices, ", "), ")");
      absl::StrAppend(&out, "\n");
    }
  }
  return out;
}

// plan_memory: the arenas, then where each value's bytes are.
std::string RenderPlan(const Program& program) {
  std::string out;
  for (const Method& m : program.methods) {
    absl::StrAppend(&out, "method ", m.name, "\n");
    for (size_t i = 0; i < m.arenas.size(); ++i)
      absl::StrAppend(&out, "  arena ", i, " ", m.arenas[i].device.ToString(),
                      ": size ", m.arenas[i].size, ", lower bound ",
                      m.arenas[i].lower_bound, "\n");
    for (const Node& n : m.nodes) {
      const std::vector<const TensorSpec*> specs = Specs(n);
      for (size_t k = 0; k < specs.size(); ++k) {
        const MemoryPlacement& p = specs[k]->memory;
        const std::string name = n.result == ResultKind::kTuple
                                     ? absl::StrCat(n.name, "[", k, "]")
                                     : n.name;
        if (!p.planned) {
          absl::StrAppend(&out, "  ", name, ": not planned\n");
          continue;
        }
        absl::StrAppend(&out, "  ", name, ": arena ", p.arena, " [", p.offset,
                        ", ", p.offset + p.size, ")\n");
      }
    }
  }
  return out;
}

// The diagnostics from `first` on: code, severity and nodes, as the
// conformance goldens hold them (messages are free to improve).
std::string RenderDiagnostics(const Diagnostics& diagnostics, size_t first) {
  std::string out;
  for (size_t i = first; i < diagnostics.items().size(); ++i) {
    const Diagnostic& d = diagnostics.items()[i];
    absl::StrAppend(&out, std::string(SeverityName(d.severity)), " ", d.code);
    if (!d.nodes.empty())
      absl::StrAppend(&out, " [", absl::StrJoin(d.nodes, ", "), "]");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

// --- The pipeline, one pass at a time ---------------------------------------

struct GoldenPass {
  const char* name;  // also the directory under golden/
  PassFn run;
  std::string (*render)(const Program&);
};

// In the pipeline's order (passes/pipeline.cc); each pass's goldens see the
// program as the passes before it left it.
constexpr GoldenPass kPasses[] = {
    {"normalize_layout", &NormalizeLayout, &RenderLayouts},
    {"partition", &Partition, &RenderGroups},
    {"lower", &LowerPartitions, &RenderModules},
    {"place_and_copy", &PlaceAndCopy, &RenderPlacement},
    {"plan_memory", &PlanMemory, &RenderPlan},
};
constexpr int kPassCount = sizeof(kPasses) / sizeof(kPasses[0]);

// The request of an input file: its own text, merged into the request a
// "# program: PATH" line names (relative to the source root).
v1::LowerRequest ReadInput(const fs::path& file) {
  const std::string text = ReadFile(file);
  v1::LowerRequest request;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "# program: ")) continue;
    bool bare = false;
    const fs::path program = kSourceDir / std::string(rest);
    absl::Status parsed = ParseRequest(ReadFile(program), FileFormat::kText,
                                       program.string(), &request, &bare);
    EXPECT_TRUE(parsed.ok()) << parsed;
  }
  EXPECT_TRUE(google::protobuf::TextFormat::MergeFromString(text, &request))
      << file;
  return request;
}

struct Staged {
  Program program;
  Diagnostics diagnostics;
  size_t first_of_last_pass = 0;  // its diagnostics start here
  bool refused = false;           // the last pass reported an error
};

// Import, options, validation, then the passes through kPasses[last], as
// Lower() runs them, stopping at the first pass that reports an error; fails
// the test when one before `last` does, unless `refusal_anywhere`.
Staged RunThrough(const v1::LowerRequest& request, int last,
                  bool refusal_anywhere = false) {
  Staged s;
  s.program = ImportProgram(request.program(), s.diagnostics);
  EXPECT_FALSE(s.diagnostics.HasErrors())
      << FormatDiagnosticsText(s.diagnostics, "import");
  LowerOptions options =
      ResolveOptions(request.options(), s.program, s.diagnostics);
  EXPECT_FALSE(s.diagnostics.HasErrors())
      << FormatDiagnosticsText(s.diagnostics, "options");
  EXPECT_TRUE(ValidateProgram(s.program, s.diagnostics))
      << FormatDiagnosticsText(s.diagnostics, "validate");
  if (s.diagnostics.HasErrors()) return s;
  options.request_bytes = static_cast<int64_t>(request.ByteSizeLong());
  absl::Status addressable = CheckAddressable(s.program);
  EXPECT_TRUE(addressable.ok()) << addressable;
  for (int i = 0; i <= last; ++i) {
    s.first_of_last_pass = s.diagnostics.items().size();
    absl::StatusOr<PassStats> stats =
        kPasses[i].run(s.program, options, s.diagnostics);
    EXPECT_TRUE(stats.ok()) << kPasses[i].name << ": " << stats.status();
    if (!s.diagnostics.HasErrors()) continue;
    s.refused = true;
    EXPECT_TRUE(i == last || refusal_anywhere)
        << "refused by " << kPasses[i].name << ", before " << kPasses[last].name
        << ":\n"
        << FormatDiagnosticsText(s.diagnostics, "case");
    break;
  }
  return s;
}

struct GoldenCase {
  int pass = 0;
  std::string name;
};

void PrintTo(const GoldenCase& c, std::ostream* out) {
  *out << kPasses[c.pass].name << "/" << c.name;
}

std::vector<GoldenCase> CasesOf(int pass) {
  std::vector<GoldenCase> cases;
  const fs::path dir = kGoldenDir / kPasses[pass].name;
  if (!fs::is_directory(dir)) return cases;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.ends_with(kInputSuffix))
      cases.push_back(GoldenCase{
          pass, file.substr(0, file.size() - std::strlen(kInputSuffix))});
  }
  std::sort(cases.begin(), cases.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return cases;
}

class PassGoldenTest : public testing::TestWithParam<GoldenCase> {
 protected:
  fs::path Input() const {
    return kGoldenDir / kPasses[GetParam().pass].name /
           (GetParam().name + kInputSuffix);
  }
};

TEST_P(PassGoldenTest, MatchesGolden) {
  const GoldenPass& pass = kPasses[GetParam().pass];
  const std::string text = ReadFile(Input());
  ASSERT_TRUE(text.starts_with("# "))
      << Input() << ": the first line says what the case pins down";
  const std::string intent = text.substr(2, text.find('\n') - 2);

  Staged s = RunThrough(ReadInput(Input()), GetParam().pass);
  std::string actual = absl::StrCat(
      "# ", GetParam().name, ": ", intent, "\n", "# after ", pass.name, "\n",
      RenderDiagnostics(s.diagnostics, s.first_of_last_pass));
  if (s.refused) {
    absl::StrAppend(&actual, "refused\n");
  } else {
    absl::StrAppend(&actual, pass.render(s.program));
  }
  testing_util::ExpectMatchesGolden(
      kGoldenDir / pass.name / (GetParam().name + kExpectedSuffix), actual);
}

// The runner is the pipeline: through the last pass, every case's program is
// what Lower() makes of it (less the options Lower() records at the end).
TEST_P(PassGoldenTest, RunnerAgreesWithLower) {
  const v1::LowerRequest request = ReadInput(Input());
  Staged s = RunThrough(request, kPassCount - 1, /*refusal_anywhere=*/true);
  absl::StatusOr<LowerResult> lowered = Lower(request);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_EQ(lowered->ok, !s.refused)
      << FormatDiagnosticsText(lowered->diagnostics, "Lower");
  EXPECT_EQ(RenderDiagnostics(s.diagnostics, 0),
            RenderDiagnostics(lowered->diagnostics, 0));
  if (s.refused) return;
  for (Method& m : lowered->program.methods) m.lowered_with.reset();
  v1::Program ours, theirs;
  ExportProgram(s.program, &ours);
  ExportProgram(lowered->program, &theirs);
  EXPECT_EQ(ToText(ours), ToText(theirs));
}

std::string CaseName(const testing::TestParamInfo<GoldenCase>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(NormalizeLayout, PassGoldenTest,
                         testing::ValuesIn(CasesOf(0)), CaseName);
INSTANTIATE_TEST_SUITE_P(Partition, PassGoldenTest,
                         testing::ValuesIn(CasesOf(1)), CaseName);
INSTANTIATE_TEST_SUITE_P(Lower, PassGoldenTest, testing::ValuesIn(CasesOf(2)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(PlaceAndCopy, PassGoldenTest,
                         testing::ValuesIn(CasesOf(3)), CaseName);
INSTANTIATE_TEST_SUITE_P(PlanMemory, PassGoldenTest,
                         testing::ValuesIn(CasesOf(4)), CaseName);

// Every pass has cases, and every expected file its input.
TEST(PassGoldens, EveryPassHasCasesAndNoExpectedFileIsOrphaned) {
  for (int pass = 0; pass < kPassCount; ++pass) {
    SCOPED_TRACE(kPasses[pass].name);
    EXPECT_GE(CasesOf(pass).size(), 3u);
    for (const auto& entry :
         fs::directory_iterator(kGoldenDir / kPasses[pass].name)) {
      const std::string file = entry.path().filename().string();
      if (!file.ends_with(kExpectedSuffix)) continue;
      const std::string name =
          file.substr(0, file.size() - std::strlen(kExpectedSuffix));
      EXPECT_TRUE(
          fs::exists(entry.path().parent_path() / (name + kInputSuffix)))
          << entry.path() << " has no input";
    }
  }
}

}  // namespace
}  // namespace ferry
