// Random programs: host operators, views, in-place writes and delegates on
// cuda:0, cuda:1 and the host, under random skip options. Every program must
// lower (or be refused with the one error the options make possible: an input
// written on the host under skip_h2d), be idempotent, and compute on the
// simulated device exactly what eager host execution of the original computes.
// The same programs go through the capability partitioner too (no tags; it
// groups what the CUDA backend runs, in-place writes included). After every
// pass, the checker of what that pass establishes runs (checks.h).
#include <cstdlib>
#include <random>

#include "absl/strings/str_cat.h"
#include "ferry/v1/program.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/checks.h"
#include "passes/diagnostic_codes.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"
#include "passes/wire_writer.h"
#include "runtime/verify.h"
#include "tests/support/programs.h"

namespace ferry {
namespace {

constexpr char kSpec[] = "tensor { dtype: F32 sizes: 4 sizes: 4 }";
constexpr char kTransposed[] =
    "tensor { dtype: F32 sizes: 4 sizes: 4 strides: 1 strides: 4 }";

struct Generated {
  std::string text;
  bool skip_h2d = false;
  bool tagged_view = false;  // a view carries a delegation tag
};

// `capability`: no delegation tags; the capability partitioner decides, with
// a random deny list.
Generated Generate(uint32_t seed, bool capability) {
  std::mt19937 rng(seed);
  Generated g;
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  std::string nodes;
  std::vector<std::string> values;  // tensor values defined so far
  std::vector<bool> transposed;
  const int inputs = 2 + pick(2);
  for (int i = 0; i < inputs; ++i) {
    std::string name = absl::StrCat("in", i);
    absl::StrAppend(&nodes, "nodes { name: \"", name,
                    "\" input { kind: USER_INPUT } ", kSpec, " }\n");
    values.push_back(name);
    transposed.push_back(false);
  }
  const char* tags[] = {"", "", "g0", "g1", "g2"};
  std::string targets =
      "partitioner { tag_targets { key: \"g0\" value: \"cuda:0\" } "
      "tag_targets { key: \"g1\" value: \"cuda:1\" } tag_targets { key: "
      "\"g2\" value: \"cpu\" } }";
  const int ops = 4 + pick(8);
  int tag_counter = 0;
  for (int k = 0; k < ops; ++k) {
    std::string name = absl::StrCat("v", k);
    int a = pick(static_cast<int>(values.size()));
    int b = pick(static_cast<int>(values.size()));
    std::string tag = tags[pick(5)];
    if (capability) tag.clear();
    // Each tagged node is its own partition (singletons are always convex).
    std::string tag_line;
    if (!tag.empty()) {
      std::string unique = absl::StrCat(tag, "_", tag_counter++);
      tag_line = absl::StrCat(" delegation_tag: \"", unique, "\"");
      absl::StrAppend(&targets, "");
      targets.insert(targets.size() - 2, absl::StrCat(" tag_targets { key: \"",
                                                      unique, "\" value: \"",
                                                      tag == "g0"   ? "cuda:0"
                                                      : tag == "g1" ? "cuda:1"
                                                                    : "cpu",
                                                      "\" }"));
    }
    switch (pick(7)) {
      case 0:
      case 1: {
        const char* op = pick(2) ? "aten::add.Tensor" : "aten::mul.Tensor";
        absl::StrAppend(&nodes, "nodes { name: \"", name, "\" call { op: \"",
                        op, "\" args { value: \"", values[a],
                        "\" } args { value: \"", values[b], "\" } } ", kSpec,
                        tag_line, " }\n");
        values.push_back(name);
        transposed.push_back(false);
        break;
      }
      case 2: {
        const char* ops1[] = {"aten::sin", "aten::relu", "aten::neg",
                              "aten::tanh"};
        absl::StrAppend(&nodes, "nodes { name: \"", name, "\" call { op: \"",
                        ops1[pick(4)], "\" args { value: \"", values[a],
                        "\" } } ", kSpec, tag_line, " }\n");
        values.push_back(name);
        transposed.push_back(false);
        break;
      }
      case 3: {  // a view (on the host, or tagged: a delegate's copy)
        absl::StrAppend(
            &nodes, "nodes { name: \"", name,
            "\" call { op: \"aten::transpose.int\" args { value: \"", values[a],
            "\" } args { int_value: 0 } args { "
            "int_value: 1 } } ",
            transposed[a] ? kSpec : kTransposed, tag_line, " }\n");
        g.tagged_view |= !tag_line.empty();
        values.push_back(name);
        transposed.push_back(!transposed[a]);
        break;
      }
      case 4:
      case 5: {  // an in-place host write
        const char* op = pick(2) ? "aten::relu_" : "aten::mul_.Scalar";
        std::string extra = std::string(op) == "aten::relu_"
                                ? ""
                                : " args { float_value: 0.5 }";
        absl::StrAppend(&nodes, "nodes { name: \"", name, "\" call { op: \"",
                        op, "\" args { value: \"", values[a], "\" }", extra,
                        " } ", transposed[a] ? kTransposed : kSpec, " }\n");
        values.push_back(name);
        transposed.push_back(transposed[a]);
        break;
      }
      default: {  // a metadata read
        absl::StrAppend(&nodes, "nodes { name: \"", name,
                        "\" call { op: \"aten::sym_size.int\" args { value: \"",
                        values[a],
                        "\" } args { int_value: 0 } } scalar: "
                        "SCALAR_INT }\n");
        break;
      }
    }
  }
  std::string outputs;
  const int count = 1 + pick(3);
  for (int k = 0; k < count; ++k)
    absl::StrAppend(
        &outputs, " values { value: \"",
        values[values.size() - 1 -
               pick(static_cast<int>(std::min<size_t>(values.size(), 4)))],
        "\" }");
  absl::StrAppend(&nodes, "nodes { name: \"output\" output {", outputs,
                  " } }\n");
  g.skip_h2d = pick(3) == 0;
  std::string options = targets;
  if (capability) {
    options = "partitioner { kind: BY_CAPABILITY";
    if (pick(3) == 0)
      absl::StrAppend(&options, " deny_operators: 'aten::relu_'");
    if (pick(3) == 0)
      absl::StrAppend(&options, " deny_operators: 'aten::add.Tensor'");
    absl::StrAppend(&options, " }");
  }
  if (g.skip_h2d)
    absl::StrAppend(&options,
                    " skip_h2d_for_method_inputs { default_value: true }");
  if (pick(3) == 0)
    absl::StrAppend(&options,
                    " skip_d2h_for_method_outputs { default_value: true }");
  g.text = absl::StrCat("program { methods { name: \"forward\"\n", nodes,
                        "} } options { ", options, " }");
  return g;
}

class RandomPrograms : public ::testing::TestWithParam<bool> {};

TEST_P(RandomPrograms, LowerIdempotentlyAndMatchEagerOnSim) {
  const bool capability = GetParam();
  int lowered = 0, refused = 0;
  // FERRY_RANDOM_SEEDS=N runs more programs (300 in the suite).
  const char* env = std::getenv("FERRY_RANDOM_SEEDS");
  const uint32_t seeds = env ? static_cast<uint32_t>(std::atoi(env)) : 300;
  for (uint32_t seed = 0; seed < seeds; ++seed) {
    Generated g = Generate(seed, capability);
    v1::LowerRequest request;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(g.text, &request))
        << g.text;
    int checked = 0;
    absl::StatusOr<LowerResult> result =
        Lower(request, {}, {}, {}, {},
              [&](std::string_view pass, const Program& program,
                  const LowerOptions& options) {
                ++checked;
                return CheckEstablished(pass, program, options);
              });
    ASSERT_TRUE(result.ok())
        << "seed " << seed << ": " << result.status() << "\n"
        << g.text;
    if (!result->ok) {
      // The only refusals these programs can earn: an input written on the
      // host while skip_h2d keeps it on a device, and a tagged view of
      // storage written after it outside its partition (E0702).
      ASSERT_TRUE(g.skip_h2d || g.tagged_view)
          << "seed " << seed << "\n"
          << FormatDiagnosticsText(result->diagnostics, "r") << g.text;
      for (const Diagnostic& d : result->diagnostics.items()) {
        if (d.severity != Severity::kError) continue;
        if (d.code == codes::kPartitionUnsupported) {
          EXPECT_TRUE(g.tagged_view) << "seed " << seed;
          EXPECT_NE(d.message.find("is an alias of"), std::string::npos)
              << "seed " << seed << ": " << d.message;
        } else {
          EXPECT_TRUE(g.skip_h2d) << "seed " << seed;
          EXPECT_EQ(d.code, codes::kInputWrittenOnHost) << "seed " << seed;
        }
      }
      ++refused;
      continue;
    }
    ++lowered;
    EXPECT_EQ(checked, 5) << "seed " << seed;  // every pass was checked
    // What the pipeline counted as it placed the copies is what the lowered
    // program holds.
    EXPECT_EQ(testing_util::CountsText(result->stats),
              testing_util::CountsText(CountStats(result->program)))
        << "seed " << seed;
    v1::Program once;
    ExportProgram(result->program, &once);
    // The wire form the service sends is written straight from the IR: the
    // same bytes as the message's.
    std::string wire;
    ASSERT_TRUE(AppendProgramWire(result->program, wire).ok());
    EXPECT_EQ(wire, SerializeProgram(once, FileFormat::kBinary))
        << "seed " << seed;
    v1::LowerRequest again;
    *again.mutable_program() = once;
    *again.mutable_options() = request.options();
    absl::StatusOr<LowerResult> twice =
        Lower(again, {}, {}, {}, {}, CheckEstablished);
    ASSERT_TRUE(twice.ok()) << "seed " << seed << ": " << twice.status();
    ASSERT_TRUE(twice->ok) << "seed " << seed;
    v1::Program twice_proto;
    ExportProgram(twice->program, &twice_proto);
    EXPECT_EQ(ToText(twice_proto), ToText(once)) << "seed " << seed;

    Diagnostics d;
    Program original = ImportProgram(request.program(), d);
    VerifyOptions options;
    options.device = VerifyDevice::kSim;
    options.seed = seed;
    absl::StatusOr<VerifyReport> report =
        VerifyPrograms(original, result->program, options);
    ASSERT_TRUE(report.ok()) << "seed " << seed << ": " << report.status();
    EXPECT_TRUE(report->ok)
        << "seed " << seed << ": " << report->Summary() << "\n"
        << g.text << "\n"
        << ToText(once);
    if (!report->ok) break;
  }
  EXPECT_GT(lowered, static_cast<int>(seeds / 2));
  RecordProperty("lowered", lowered);
  RecordProperty("refused", refused);
}

INSTANTIATE_TEST_SUITE_P(Partitioners, RandomPrograms, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "ByCapability" : "ByTag";
                         });

}  // namespace
}  // namespace ferry
