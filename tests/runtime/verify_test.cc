// The verifier has teeth: hand-made broken lowered programs (programs/*),
// each paired with its correct version, verified on the simulated device.
// Each broken program must produce the mismatch, or an error naming the
// node at fault; each correct one must verify.
#include "runtime/verify.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ferry/file.h"
#include "ferry/v1/program.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/pipeline.h"
#include "passes/place_and_copy.h"
#include "passes/proto_io.h"
#include "passes/report_io.h"
#include "passes/validate.h"
#include "runtime/verify_io.h"
#include "tests/runtime/test_util.h"
#include "tests/support/files.h"

namespace ferry::testing {
namespace {

VerifyReport VerifyOnSim(std::string_view original, std::string_view lowered,
                         uint64_t seed = 0) {
  Program o = LoadProgramFile(original);
  Program l = LoadProgramFile(lowered);
  VerifyOptions options;
  options.device = VerifyDevice::kSim;
  options.seed = seed;
  absl::StatusOr<VerifyReport> report = VerifyPrograms(o, l, options);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? *report : VerifyReport{};
}

// A lowered program that validation refuses (its code is `code`), verified
// anyway: the runtime, which can be handed programs directly, must refuse
// it too.
VerifyReport VerifyRefusedOnSim(std::string_view original,
                                std::string_view lowered,
                                const std::string& code) {
  Diagnostics validation;
  Program l = ParseProgramUnvalidated(
      testing_util::ReadFile(std::string(FERRY_RUNTIME_TEST_PROGRAMS) + "/" +
                             std::string(lowered)),
      &validation);
  EXPECT_EQ(validation.items().size(), 1u)
      << FormatDiagnosticsText(validation, std::string(lowered));
  for (const Diagnostic& d : validation.items()) EXPECT_EQ(d.code, code);
  VerifyOptions options;
  options.device = VerifyDevice::kSim;
  absl::StatusOr<VerifyReport> report =
      VerifyPrograms(LoadProgramFile(original), l, options);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? *report : VerifyReport{};
}

void ExpectVerifies(std::string_view original, std::string_view lowered) {
  for (uint64_t seed : {0, 1, 2}) {
    VerifyReport report = VerifyOnSim(original, lowered, seed);
    EXPECT_TRUE(report.ok) << lowered << "\n" << report.Summary();
    EXPECT_EQ(report.device, "sim");
  }
}

void ExpectErrorMentions(const VerifyReport& report,
                         const std::vector<std::string>& parts) {
  EXPECT_FALSE(report.ok);
  for (const std::string& part : parts)
    EXPECT_NE(report.error.find(part), std::string::npos)
        << "'" << part << "' not in: " << report.error;
}

// B2 without the fix: relu_ writes the host copy, d1 reads the stale device
// value. The numbers differ, and the report says where.
TEST(VerifyTeethTest, NoCopyAfterHostWriteIsAMismatch) {
  VerifyReport report = VerifyOnSim("b2_original.textproto",
                                    "b2_lowered_no_copy_after_write.textproto");
  EXPECT_FALSE(report.ok);
  EXPECT_TRUE(report.error.empty()) << report.error;
  ASSERT_EQ(report.outputs.size(), 1u);
  const OutputComparison& c = report.outputs[0];
  EXPECT_EQ(c.method, "forward");
  EXPECT_EQ(c.output_index, 0);
  EXPECT_EQ(c.dtype, "f32");
  EXPECT_FALSE(c.match);
  EXPECT_GT(c.mismatched_elements, 0);
  EXPECT_GE(c.first_mismatch_index, 0);
  EXPECT_NE(c.expected_value, c.actual_value);
  EXPECT_GT(c.max_abs_error, c.atol);
  EXPECT_NE(report.Summary().find("MISMATCH"), std::string::npos)
      << report.Summary();
  ExpectVerifies("b2_original.textproto", "b2_lowered.textproto");
}

// A delegate on cuda:0 given host memory (no H2D).
TEST(VerifyTeethTest, HostMemoryUsedAsDeviceMemoryNamesTheDelegate) {
  VerifyReport report = VerifyOnSim(
      "a1_original.textproto", "a1_lowered_host_memory_as_device.textproto");
  EXPECT_EQ(report.error,
            "method 'forward': delegate 'd0' (module 'm0' on cuda:0): argument "
            "0 ('a') is in "
            "host memory, not sim cuda:0 memory");
}

// B1: the module was compiled for w contiguous but is handed the stored,
// transposed layout: as its owned constant, or as an input. Validation
// refuses both (FERRY-E0207, FERRY-E0410); so does the runtime.
TEST(VerifyTeethTest,
     StoredLayoutInsteadOfCompiledNamesTheDelegateAndBothLayouts) {
  VerifyReport owned =
      VerifyRefusedOnSim("b1_original.textproto",
                         "b1_lowered_stored_layout.textproto", "FERRY-E0207");
  ExpectErrorMentions(owned, {"delegate 'd0'", "constant 'w'",
                              "f32[4,3] strides [1,4] offset 0",
                              "f32[4,3] strides [3,1] offset 0"});
  VerifyReport input = VerifyRefusedOnSim(
      "b1_original.textproto", "b1_lowered_stored_layout_input.textproto",
      "FERRY-E0410");
  EXPECT_EQ(input.error,
            "method 'forward': delegate 'd0' (module 'm0' on cuda:0): argument "
            "1 ('w_h2d') is laid "
            "out as f32[4,3] strides [1,4] offset 0 but the module was "
            "compiled for f32[4,3] "
            "strides [3,1] offset 0");
  ExpectVerifies("b1_original.textproto", "b1_lowered.textproto");
}

// B3: the bare delegate result is read by a host op with no D2H.
TEST(VerifyTeethTest, MissingD2HOnABareResultNamesTheHostReader) {
  VerifyReport report =
      VerifyOnSim("b3_original.textproto", "b3_lowered_missing_d2h.textproto");
  EXPECT_EQ(report.error,
            "method 'forward': node 'r': host operator aten::relu given memory "
            "on sim cuda:0 "
            "(argument 'self', value 'd0')");
  ExpectVerifies("b3_original.textproto", "b3_lowered.textproto");
}

// B7: copies "to cpu" for a cpu-target delegate.
TEST(VerifyTeethTest, CpuTargetCopiesNameTheCopy) {
  VerifyReport report = VerifyOnSim("b7_original.textproto",
                                    "b7_lowered_cpu_target_copies.textproto");
  EXPECT_EQ(report.error,
            "method 'forward': node 'a_h2d': H2D copy targets cpu: its result "
            "must be on a device");
  ExpectVerifies("b7_original.textproto", "b7_lowered.textproto");
}

// Lowers a program of programs/ with `options` (LowerOptions in text form).
Program LowerFile(std::string_view name, const std::string& options) {
  const std::string text = testing_util::ReadFile(
      std::string(FERRY_RUNTIME_TEST_PROGRAMS) + "/" + std::string(name));
  v1::LowerRequest request;
  bool bare = false;
  EXPECT_TRUE(
      ParseRequest(text, FileFormat::kText, name, &request, &bare).ok());
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      options, request.mutable_options()));
  absl::StatusOr<LowerResult> result = Lower(request);
  EXPECT_TRUE(result.ok() && result->ok)
      << (result.ok() ? FormatDiagnosticsText(result->diagnostics, name)
                      : std::string(result.status().message()));
  return result.ok() ? std::move(result->program) : Program{};
}

// Removes the D2H copies the outputs of method 0 read: each output reads the
// copy's source (on the device) instead.
Program WithoutOutputD2H(Program program) {
  Method& m = program.methods[0];
  for (int32_t k = static_cast<int32_t>(m.nodes.size()) - 1; k >= 0; --k) {
    if (!IsD2HCopy(m.nodes[k])) continue;
    Node& output = m.nodes.back();
    bool feeds_output = false;
    for (Argument& arg : output.args) {
      if (arg.kind == ArgKind::kValue && arg.value.node == k) {
        arg.value = m.nodes[k].args[0].value;
        feeds_output = true;
      }
    }
    if (!feeds_output) continue;
    m.nodes.erase(m.nodes.begin() + k);
    for (size_t j = k; j < m.nodes.size(); ++j) {
      ForEachOperandMutable(m.nodes[j], [&](ValueId& v) {
        if (v.node > k) --v.node;
      });
    }
  }
  return program;
}

VerifyReport VerifyLoweredOnSim(const Program& original,
                                const Program& lowered) {
  Diagnostics validation;
  ValidateProgram(lowered, validation);
  EXPECT_FALSE(validation.HasErrors())
      << FormatDiagnosticsText(validation, "lowered");
  VerifyOptions options;
  options.device = VerifyDevice::kSim;
  absl::StatusOr<VerifyReport> report =
      VerifyPrograms(original, lowered, options);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? *report : VerifyReport{};
}

// The lowered program records the options it was lowered with; a method
// output left on the device without skip_d2h_for_method_outputs (its D2H
// removed) is a verification failure naming the output, although the
// program validates and its numbers match (the runtime reads device outputs
// back itself).
TEST(VerifyTeethTest, MissingD2HOfAMethodOutputNamesTheOutput) {
  Program original = LoadProgramFile("a1_original.textproto");
  Program lowered = LowerFile("a1_original.textproto", "");
  ASSERT_EQ(lowered.methods.size(), 1u);
  ASSERT_TRUE(lowered.methods[0].lowered_with.has_value());
  EXPECT_FALSE(lowered.methods[0].lowered_with->skip_d2h_for_method_outputs);
  VerifyReport good = VerifyLoweredOnSim(original, lowered);
  EXPECT_TRUE(good.ok) << good.Summary();

  Program broken = WithoutOutputD2H(lowered);
  ASSERT_EQ(CountStats(broken).d2h_copies, 0);
  VerifyReport report = VerifyLoweredOnSim(original, broken);
  EXPECT_FALSE(report.ok);
  EXPECT_EQ(report.error,
            "method 'forward': output 0 ('t') is left on cuda:0, but the "
            "method was lowered without skip_d2h_for_method_outputs: it must "
            "be returned on the host (is its D2H copy missing?)");

  // A program with no record is held to the defaults.
  broken.methods[0].lowered_with.reset();
  EXPECT_EQ(VerifyLoweredOnSim(original, broken).error, report.error);
}

// Where skip_d2h_for_method_outputs allowed it, the output stays on the
// device and verifies; the same program claiming it was lowered without the
// option does not. Likewise for inputs and skip_h2d_for_method_inputs.
TEST(VerifyTeethTest, OutputsAndInputsAreWhereTheRecordedOptionsSay) {
  Program original = LoadProgramFile("a1_original.textproto");
  Program kept = LowerFile("a1_original.textproto",
                           "skip_d2h_for_method_outputs { default_value: true "
                           "} skip_h2d_for_method_inputs { per_method { key: "
                           "'forward' value: true } }");
  ASSERT_TRUE(kept.methods[0].lowered_with.has_value());
  EXPECT_TRUE(kept.methods[0].lowered_with->skip_d2h_for_method_outputs);
  EXPECT_TRUE(kept.methods[0].lowered_with->skip_h2d_for_method_inputs);
  VerifyReport good = VerifyLoweredOnSim(original, kept);
  EXPECT_TRUE(good.ok) << good.Summary();

  Program outputs_claimed = kept;
  outputs_claimed.methods[0].lowered_with->skip_d2h_for_method_outputs = false;
  EXPECT_EQ(VerifyLoweredOnSim(original, outputs_claimed).error,
            "method 'forward': output 0 ('t') is left on cuda:0, but the "
            "method was lowered without skip_d2h_for_method_outputs: it must "
            "be returned on the host (is its D2H copy missing?)");

  Program inputs_claimed = kept;
  inputs_claimed.methods[0].lowered_with->skip_h2d_for_method_inputs = false;
  EXPECT_EQ(VerifyLoweredOnSim(original, inputs_claimed).error,
            "method 'forward': user input 0 ('a') is taken on cuda:0, but the "
            "method was lowered without skip_h2d_for_method_inputs: inputs "
            "arrive on the host");
}

TEST(VerifyTest, ReportsAsJsonAndText) {
  VerifyReport report;
  report.ok = false;
  report.device = "sim";
  OutputComparison c;
  c.method = "forward";
  c.dtype = "f32";
  c.sizes = {2, 3};
  c.elements = 6;
  c.match = false;
  c.mismatched_elements = 2;
  c.first_mismatch_index = 3;
  c.expected_value = 0.5;
  c.actual_value = std::nan("");
  c.max_abs_error = std::numeric_limits<double>::infinity();
  c.max_abs_error_index = {1, 0};
  c.max_rel_error = std::numeric_limits<double>::infinity();
  c.max_rel_error_index = {1, 0};
  c.atol = 1e-5;
  c.rtol = 1e-5;
  report.outputs.push_back(c);
  EXPECT_EQ(
      ReportJson(VerifyReportToProto(report)),
      "{\"ok\":false,\"device\":\"sim\",\"error\":\"\",\"outputs\":[{"
      "\"method\":\"forward\",\"output_index\":0,\"dtype\":\"f32\","
      "\"match\":false,\"mismatched_elements\":\"2\","
      "\"first_mismatch_index\":\"3\",\"expected_value\":0.5,"
      "\"actual_value\":\"NaN\",\"max_abs_error\":\"Infinity\","
      "\"max_rel_error\":\"Infinity\",\"atol\":1e-05,\"rtol\":1e-05,"
      "\"sizes\":[\"2\",\"3\"],\"elements\":\"6\","
      "\"max_abs_error_index\":[\"1\",\"0\"],"
      "\"max_rel_error_index\":[\"1\",\"0\"]}],"
      "\"summary\":\"verify on sim: MISMATCH in 1 of 1 output (forward output "
      "0: 2 / 6 elements)\",\"host_fallbacks\":[]}");
  // The wire form reads back into the same report.
  VerifyReport back = VerifyReportFromProto(VerifyReportToProto(report));
  EXPECT_EQ(back.Text(), report.Text());
  EXPECT_EQ(ReportJson(VerifyReportToProto(back)),
            ReportJson(VerifyReportToProto(report)));
  EXPECT_EQ(report.Text(),
            "verify on sim: MISMATCH in 1 of 1 output (forward output 0: 2 / 6 "
            "elements)\n"
            "  forward output 0 (f32[2,3]): MISMATCH\n"
            "    Mismatched elements: 2 / 6 (33.3%)\n"
            "    Greatest absolute difference: inf at index (1, 0) (up to "
            "1e-05 allowed)\n"
            "    Greatest relative difference: inf at index (1, 0) (up to "
            "1e-05 allowed)\n"
            "    First mismatch at index (1, 0): expected 0.5, got nan\n");
}

// The figures of torch.testing.assert_close, checked against an oracle:
// `expected` and `actual` are two user inputs the two programs return
// unchanged, so the comparison sees exactly the data built here, and the
// test computes the counts, the greatest differences and their indices
// itself.
TEST(VerifyTest, MismatchReportsCountsGreatestDifferencesAndTheirIndices) {
  constexpr int kRows = 4, kCols = 30, kN = kRows * kCols;
  // Returns the user input named `returned` (a clone of it).
  auto program = [](const std::string& returned) {
    std::string text = R"pb(
      methods {
        name: "forward"
        nodes {
          name: "expected"
          input { kind: USER_INPUT }
          tensor {
            dtype: F32
            sizes: [ 4, 30 ]
          }
        }
        nodes {
          name: "actual"
          input { kind: USER_INPUT }
          tensor {
            dtype: F32
            sizes: [ 4, 30 ]
          }
        }
        nodes {
          name: "r"
          call {
            op: "aten::clone"
            args { value: "RETURNED" }
          }
          tensor {
            dtype: F32
            sizes: [ 4, 30 ]
          }
        }
        nodes {
          name: "output"
          output { values { value: "r" } }
        }
      }
    )pb";
    text.replace(text.find("RETURNED"), 8, returned);
    return ParseProgram(text);
  };
  std::vector<float> expected(kN), actual(kN);
  for (int i = 0; i < kN; ++i) expected[i] = actual[i] = 1.0f + 0.5f * i;
  expected[3] = 0.0f;  // (0, 3): actual 0.25 against 0: relative inf
  actual[3] = 0.25f;
  actual[1 * kCols + 2] += 0.5f;   // (1, 2): the greatest absolute
  actual[3 * kCols + 29] -= 0.4f;  // (3, 29)
  actual[2 * kCols + 7] += 1e-4f;  // within rtol * 15.5: a match
  auto given = [&](const std::string& name, const std::vector<float>& data) {
    GivenInput input;
    input.method = "forward";
    input.input = name;
    input.dtype = DType::kF32;
    input.sizes = {kRows, kCols};
    input.data.assign(reinterpret_cast<const char*>(data.data()),
                      data.size() * sizeof(float));
    return input;
  };
  VerifyOptions options;
  options.device = VerifyDevice::kSim;
  options.inputs = {given("expected", expected), given("actual", actual)};
  absl::StatusOr<VerifyReport> report =
      VerifyPrograms(program("expected"), program("actual"), options);
  ASSERT_TRUE(report.ok()) << report.status();

  // The oracle, over the mismatching elements as assert_close does.
  const Tolerance tolerance = ToleranceFor(DType::kF32, "sim");
  int64_t mismatched = 0, first = -1, abs_at = -1, rel_at = -1;
  double greatest_abs = -1, greatest_rel = -1;
  for (int i = 0; i < kN; ++i) {
    const double e = expected[i], a = actual[i];
    const double diff = std::fabs(a - e);
    if (diff <= tolerance.atol + tolerance.rtol * std::fabs(e)) continue;
    ++mismatched;
    if (first < 0) first = i;
    const double rel =
        e == 0 ? std::numeric_limits<double>::infinity() : diff / std::fabs(e);
    if (diff > greatest_abs) greatest_abs = diff, abs_at = i;
    if (rel > greatest_rel) greatest_rel = rel, rel_at = i;
  }
  ASSERT_EQ(mismatched, 3);  // the data is what the test meant
  auto nd = [&](int64_t i) {
    return std::vector<int64_t>{i / kCols, i % kCols};
  };

  ASSERT_EQ(report->outputs.size(), 1u);
  const OutputComparison& c = report->outputs[0];
  EXPECT_FALSE(c.match);
  EXPECT_EQ(c.elements, kN);
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{kRows, kCols}));
  EXPECT_EQ(c.mismatched_elements, mismatched);
  EXPECT_EQ(c.first_mismatch_index, first);
  EXPECT_EQ(c.max_abs_error, greatest_abs);
  EXPECT_EQ(c.max_abs_error_index, nd(abs_at));
  EXPECT_EQ(c.max_abs_error_index, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(std::isinf(c.max_rel_error));
  EXPECT_EQ(c.max_rel_error_index, nd(rel_at));
  EXPECT_EQ(c.max_rel_error_index, (std::vector<int64_t>{0, 3}));

  const std::string text = report->Text();
  EXPECT_EQ(report->Summary(),
            "verify on sim: MISMATCH in 1 of 1 output (forward output 0: 3 / "
            "120 elements)");
  EXPECT_EQ(report->Summary().find('\n'), std::string::npos);
  EXPECT_NE(text.find("  forward output 0 (f32[4,30]): MISMATCH\n"
                      "    Mismatched elements: 3 / 120 (2.5%)\n"
                      "    Greatest absolute difference: 0.5 at index (1, 2) "
                      "(up to 1e-05 allowed)\n"
                      "    Greatest relative difference: inf at index (0, 3) "
                      "(up to 1e-05 allowed)\n"
                      "    First mismatch at index (0, 3): expected 0, got "
                      "0.25\n"),
            std::string::npos)
      << text;
  const std::string json = ReportJson(VerifyReportToProto(*report));
  EXPECT_NE(json.find("\"max_rel_error\":\"Infinity\""), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"max_abs_error_index\":[\"1\",\"2\"],"
                      "\"max_rel_error_index\":[\"0\",\"3\"]"),
            std::string::npos)
      << json;

  // Equal data: a match, its greatest differences over all elements (0).
  options.inputs = {given("expected", expected), given("actual", expected)};
  absl::StatusOr<VerifyReport> same =
      VerifyPrograms(program("expected"), program("actual"), options);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(same->ok) << same->Text();
  EXPECT_EQ(same->Summary(), "verify on sim: OK (1 output matches)");
  EXPECT_EQ(same->outputs[0].max_rel_error, 0);
}

TEST(VerifyTest, TolerancesDependOnDTypeAndBackend) {
  EXPECT_EQ(ToleranceFor(DType::kI32, "sim").atol, 0);
  EXPECT_EQ(ToleranceFor(DType::kBool, "cuda").rtol, 0);
  EXPECT_LT(ToleranceFor(DType::kF32, "sim").atol,
            ToleranceFor(DType::kF16, "sim").atol);
  EXPECT_LT(ToleranceFor(DType::kF32, "sim").atol,
            ToleranceFor(DType::kF32, "cuda").atol);
}

TEST(VerifyTest, DevicesAndUnavailableCuda) {
  std::vector<std::string> devices = VisibleDevices();
  ASSERT_GE(devices.size(), 2u);
  EXPECT_EQ(devices[0], "cpu");
  EXPECT_EQ(devices[1], "sim");
  Program o = LoadProgramFile("a1_original.textproto");
  Program l = LoadProgramFile("b7_lowered.textproto");
  VerifyOptions options;
  options.device = VerifyDevice::kCuda;
  if (!CudaAvailable()) {
    EXPECT_EQ(VerifyPrograms(o, l, options).status().code(),
              absl::StatusCode::kFailedPrecondition);
    options.device = VerifyDevice::kAuto;
    absl::StatusOr<VerifyReport> report =
        VerifyPrograms(LoadProgramFile("b7_original.textproto"), l, options);
    ASSERT_TRUE(report.ok());
    EXPECT_EQ(report->device, "sim");
  }
  options.device = VerifyDevice::kSim;
  options.keep_going = [] { return false; };
  EXPECT_EQ(VerifyPrograms(o, l, options).status().code(),
            absl::StatusCode::kCancelled);
}

TEST(VerifyTest, IntegerOutputsCompareExactly) {
  Program program = ParseProgram(R"pb(
    methods {
      name: "forward"
      nodes {
        name: "a"
        input { kind: USER_INPUT }
        tensor {
          dtype: I64
          sizes: [ 5 ]
        }
      }
      nodes {
        name: "b"
        call {
          op: "aten::mul.Scalar"
          args { value: "a" }
          args { int_value: 3 }
        }
        tensor {
          dtype: I64
          sizes: [ 5 ]
        }
      }
      nodes {
        name: "output"
        output { values { value: "b" } }
      }
    }
  )pb");
  Program off_by_one = ParseProgram(R"pb(
    methods {
      name: "forward"
      nodes {
        name: "a"
        input { kind: USER_INPUT }
        tensor {
          dtype: I64
          sizes: [ 5 ]
        }
      }
      nodes {
        name: "b"
        call {
          op: "aten::mul.Scalar"
          args { value: "a" }
          args { int_value: 3 }
        }
        tensor {
          dtype: I64
          sizes: [ 5 ]
        }
      }
      nodes {
        name: "c"
        call {
          op: "aten::add.Scalar"
          args { value: "b" }
          args { int_value: 1 }
        }
        tensor {
          dtype: I64
          sizes: [ 5 ]
        }
      }
      nodes {
        name: "output"
        output { values { value: "c" } }
      }
    }
  )pb");
  VerifyOptions options;
  options.device = VerifyDevice::kSim;
  absl::StatusOr<VerifyReport> same = VerifyPrograms(program, program, options);
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->ok) << same->Summary();
  absl::StatusOr<VerifyReport> off =
      VerifyPrograms(program, off_by_one, options);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->ok);
  EXPECT_EQ(off->outputs[0].mismatched_elements, 5);
  EXPECT_EQ(off->outputs[0].first_mismatch_index, 0);
  EXPECT_EQ(off->outputs[0].actual_value - off->outputs[0].expected_value, 1);
}

}  // namespace
}  // namespace ferry::testing

namespace ferry::testing {
namespace {

GivenInput Filled(const std::string& name, float value) {
  GivenInput input;
  input.method = "forward";
  input.input = name;
  input.dtype = DType::kF32;
  input.sizes = {4, 4};
  input.data.resize(16 * sizeof(float));
  for (int i = 0; i < 16; ++i)
    std::memcpy(&input.data[i * sizeof(float)], &value, sizeof(float));
  return input;
}

// Given inputs replace generated ones: with a + b > 0 everywhere the missing
// relu_ round trip of the broken B2 program changes nothing, so it matches;
// with generated inputs it does not.
TEST(VerifyTest, GivenInputsAreTheOnesUsed) {
  Program original = LoadProgramFile("b2_original.textproto");
  Program broken = LoadProgramFile("b2_lowered_no_copy_after_write.textproto");
  VerifyOptions options;
  options.device = VerifyDevice::kSim;
  options.inputs = {Filled("a", 1.0f), Filled("b", 2.0f), Filled("c", -3.0f)};
  absl::StatusOr<VerifyReport> given =
      VerifyPrograms(original, broken, options);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_TRUE(given->ok) << given->Summary();
  options.inputs.clear();
  absl::StatusOr<VerifyReport> generated =
      VerifyPrograms(original, broken, options);
  ASSERT_TRUE(generated.ok());
  EXPECT_FALSE(generated->ok);
}

TEST(VerifyTest, GivenInputsMustFitTheInput) {
  Program original = LoadProgramFile("b2_original.textproto");
  Program lowered = LoadProgramFile("b2_lowered.textproto");
  VerifyOptions options;
  options.device = VerifyDevice::kSim;
  GivenInput wrong = Filled("a", 1.0f);
  wrong.sizes = {2, 8};
  options.inputs = {wrong};
  EXPECT_EQ(VerifyPrograms(original, lowered, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.inputs = {Filled("nope", 1.0f)};
  EXPECT_EQ(VerifyPrograms(original, lowered, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  GivenInput short_data = Filled("a", 1.0f);
  short_data.data.resize(8);
  options.inputs = {short_data};
  EXPECT_EQ(VerifyPrograms(original, lowered, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ferry::testing
