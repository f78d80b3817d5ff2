// Verification: run both programs, compare every output.
//
//   inputs   = GenerateUserInputs(original.method, seed)   (same for both)
//   expected = Executor(original, kEager).Run(method, inputs)
//   actual   = Executor(lowered, kSim | kCuda).Run(method, inputs)
//   compare expected[i] with actual[i], element by element
#include "runtime/verify.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <span>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "passes/diagnostics.h"
#include "runtime/absl_compat.h"
#include "runtime/device.h"
#include "runtime/element.h"
#include "runtime/executor.h"
#include "runtime/ops/backend_ops.h"

namespace ferry {

Tolerance ToleranceFor(DType dtype, std::string_view device) {
  const bool cuda = device == "cuda";
  switch (dtype) {
    case DType::kF64:
      return cuda ? Tolerance{1e-7, 1e-7} : Tolerance{1e-9, 1e-9};
    case DType::kF32:
      return cuda ? Tolerance{1e-4, 1e-4} : Tolerance{1e-5, 1e-5};
    case DType::kF16:
      return cuda ? Tolerance{1e-2, 1e-2} : Tolerance{1e-3, 1e-3};
    case DType::kBF16:
      return cuda ? Tolerance{5e-2, 5e-2} : Tolerance{1e-2, 1e-2};
    default:
      return Tolerance{0, 0};
  }
}

bool WithinTolerance(double actual, double expected,
                     const Tolerance& tolerance) {
  if (std::isnan(expected) || std::isnan(actual))
    return std::isnan(expected) && std::isnan(actual);
  if (std::isinf(expected) || std::isinf(actual)) return expected == actual;
  return std::fabs(actual - expected) <=
         tolerance.atol + tolerance.rtol * std::fabs(expected);
}

std::vector<std::string> VisibleDevices() {
  std::vector<std::string> devices = {"cpu", "sim"};
  const int count = CudaDeviceCount();
  for (int i = 0; i < count; ++i) devices.push_back(absl::StrCat("cuda:", i));
  return devices;
}

namespace {

// The highest cuda index the program uses anywhere (-1: none).
int MaxCudaIndex(const Program& program) {
  int max_index = -1;
  auto spec_device = [&](const TensorSpec& spec) {
    if (!spec.device.is_host())
      max_index = std::max<int>(max_index, spec.device.index);
  };
  auto scan_method = [&](const Method& method) {
    for (const Arena& arena : method.arenas)
      if (!arena.device.is_host())
        max_index = std::max<int>(max_index, arena.device.index);
    for (const Node& node : method.nodes) {
      if (node.result == ResultKind::kTensor) spec_device(node.tensor);
      for (const TensorSpec& spec : node.tuple) spec_device(spec);
    }
  };
  for (const Method& method : program.methods) scan_method(method);
  for (const LoweredModule& module : program.modules) {
    if (!module.device().is_host())
      max_index = std::max<int>(max_index, module.device().index);
  }
  return max_index;
}

absl::StatusOr<ExecutionMode> ChooseMode(const Program& lowered,
                                         VerifyDevice requested) {
  if (requested == VerifyDevice::kSim) return ExecutionMode::kSim;
  const int gpus = CudaDeviceCount();
  const int needed = MaxCudaIndex(lowered) + 1;
  if (requested == VerifyDevice::kAuto)
    return gpus > 0 && needed <= gpus ? ExecutionMode::kCuda
                                      : ExecutionMode::kSim;
  if (gpus == 0) {
    return absl::FailedPreconditionError(
        "verification on cuda was requested, but no GPU is visible");
  }
  if (needed > gpus) {
    return absl::FailedPreconditionError(
        absl::StrCat("the program uses cuda:", needed - 1, ", but only ", gpus,
                     " GPU(s) are visible"));
  }
  return ExecutionMode::kCuda;
}

// The absolute and relative difference of one element pair, as
// torch.testing.assert_close computes them: a NaN or an infinity against a
// different value differs by infinity (and matching ones by 0); the relative
// difference is infinite where expected is 0 and actual is not.
struct Difference {
  double absolute = 0, relative = 0;
};
Difference DifferenceOf(double actual, double expected, bool same) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const bool finite = std::isfinite(actual) && std::isfinite(expected);
  if (!finite) return same ? Difference{} : Difference{kInf, kInf};
  Difference d;
  d.absolute = std::fabs(actual - expected);
  if (d.absolute == 0) return d;
  d.relative = expected == 0 ? kInf : d.absolute / std::fabs(expected);
  return d;
}

OutputComparison Compare(const std::string& method, int index,
                         const HostTensor& expected, const HostTensor& actual,
                         std::string_view device) {
  OutputComparison c;
  c.method = method;
  c.output_index = index;
  c.dtype = std::string(DTypeName(expected.dtype));
  c.sizes = expected.sizes;
  const Tolerance tolerance = ToleranceFor(expected.dtype, device);
  c.atol = tolerance.atol;
  c.rtol = tolerance.rtol;
  const DType ec = expected.dtype;
  const DType ac = actual.dtype;
  const int64_t n = expected.numel();
  c.elements = n;
  const int64_t ee = ElementSize(expected.dtype),
                ae = ElementSize(actual.dtype);
  const bool exact = !IsFloatingPoint(expected.dtype);
  // Greatest differences over all elements and over the mismatching ones
  // (first index of each; -1: none yet). The report keeps the second pair
  // when there is a mismatch, as assert_close does.
  struct Greatest {
    double abs = 0, rel = 0;
    int64_t abs_at = -1, rel_at = -1;
    void Add(const Difference& d, int64_t i) {
      if (abs_at < 0 || d.absolute > abs) abs = d.absolute, abs_at = i;
      if (rel_at < 0 || d.relative > rel) rel = d.relative, rel_at = i;
    }
  } all, mismatched;
  for (int64_t i = 0; i < n; ++i) {
    const std::byte* ep = expected.data.data() + i * ee;
    const std::byte* ap = actual.data.data() + i * ae;
    double e, a;
    bool same;
    if (exact) {
      const int64_t ei = element::LoadAsInt64(ec, ep),
                    ai = element::LoadAsInt64(ac, ap);
      e = static_cast<double>(ei);
      a = static_cast<double>(ai);
      same = ei == ai;
    } else {
      e = element::LoadAsDouble(ec, ep);
      a = element::LoadAsDouble(ac, ap);
      same = WithinTolerance(a, e, tolerance);
    }
    const Difference d = DifferenceOf(a, e, same);
    all.Add(d, i);
    if (!same) {
      mismatched.Add(d, i);
      if (c.first_mismatch_index < 0) {
        c.first_mismatch_index = i;
        c.expected_value = e;
        c.actual_value = a;
      }
      ++c.mismatched_elements;
    }
  }
  c.match = c.mismatched_elements == 0;
  const Greatest& greatest = c.match ? all : mismatched;
  c.max_abs_error = greatest.abs;
  c.max_rel_error = greatest.rel;
  if (greatest.abs_at >= 0)
    c.max_abs_error_index = UnravelIndex(greatest.abs_at, c.sizes);
  if (greatest.rel_at >= 0)
    c.max_rel_error_index = UnravelIndex(greatest.rel_at, c.sizes);
  return c;
}

// Where the options a method was lowered with say its values must be:
// without skip_h2d_for_method_inputs the user inputs are taken on the host,
// without skip_d2h_for_method_outputs every tensor output is returned on the
// host. The runtime reads device outputs back itself (to compare them), so
// only this check sees a missing D2H of a method output. A method with no
// record is checked against the default options.
absl::Status CheckPlacedAsLowered(const Program& lowered,
                                  std::string_view method_name,
                                  const Executor& executor) {
  const Method* method = nullptr;
  for (const Method& m : lowered.methods)
    if (m.name == method_name) method = &m;
  if (method == nullptr) return absl::OkStatus();  // reported by Run
  absl::StatusOr<Executor::Locations> where = executor.Where(method_name);
  if (!where.ok()) return where.status();
  const LoweredWith with = method->lowered_with.value_or(LoweredWith{});
  const std::string prefix = absl::StrCat("method '", method->name, "': ");
  if (!with.skip_h2d_for_method_inputs) {
    size_t position = 0;
    for (const Node& node : method->nodes) {
      if (node.kind != NodeKind::kInput ||
          node.input_kind != InputKind::kUserInput)
        continue;
      if (position < where->inputs.size() &&
          !where->inputs[position].is_host()) {
        return absl::FailedPreconditionError(absl::StrCat(
            prefix, "user input ", position, " ('", node.name,
            "') is taken on ", where->inputs[position].ToString(),
            ", but the method was lowered without "
            "skip_h2d_for_method_inputs: inputs arrive on the host"));
      }
      ++position;
    }
  }
  if (!with.skip_d2h_for_method_outputs) {
    const Node* output = nullptr;
    for (const Node& node : method->nodes)
      if (node.kind == NodeKind::kOutput) output = &node;
    for (size_t i = 0; i < where->outputs.size(); ++i) {
      if (!where->outputs[i].has_value() || where->outputs[i]->is_host())
        continue;
      std::string name;
      if (output != nullptr && i < output->args.size() &&
          output->args[i].kind == ArgKind::kValue)
        name =
            absl::StrCat(" ('", method->ValueName(output->args[i].value), "')");
      return absl::FailedPreconditionError(absl::StrCat(
          prefix, "output ", i, name, " is left on ",
          where->outputs[i]->ToString(),
          ", but the method was lowered without skip_d2h_for_method_outputs: "
          "it must be returned on the host (is its D2H copy missing?)"));
    }
  }
  return absl::OkStatus();
}

std::string Number(double v) {
  if (std::isnan(v)) return "nan";
  return absl::StrFormat("%.9g", v);
}

}  // namespace

std::vector<int64_t> UnravelIndex(int64_t linear,
                                  const std::vector<int64_t>& sizes) {
  std::vector<int64_t> index(sizes.size(), 0);
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] <= 0) continue;
    index[d] = linear % sizes[d];
    linear /= sizes[d];
  }
  return index;
}

namespace {

// Python's tuple, as assert_close prints an index: "(1, 2)", "(3,)", "()".
std::string IndexText(const std::vector<int64_t>& index) {
  if (index.size() == 1) return absl::StrCat("(", index[0], ",)");
  return absl::StrCat("(", absl::StrJoin(index, ", "), ")");
}

std::string OutputName(const OutputComparison& c) {
  return absl::StrCat(c.method, " output ", c.output_index);
}

}  // namespace

std::string VerifyReport::Summary() const {
  std::string fallbacks;
  for (const HostFallback& f : host_fallbacks)
    absl::StrAppend(&fallbacks, fallbacks.empty() ? "host fallbacks: " : ", ",
                    f.op, " x", f.count);
  const std::string head = absl::StrCat("verify on ", device, ": ");
  if (!error.empty()) {
    // One line: the error's own line breaks become spaces.
    std::string one_line = error;
    std::replace(one_line.begin(), one_line.end(), '\n', ' ');
    return absl::StrCat(head, "ERROR: ", one_line,
                        fallbacks.empty() ? "" : " (", fallbacks,
                        fallbacks.empty() ? "" : ")");
  }
  if (ok) {
    return absl::StrCat(
        head, "OK (", outputs.size(),
        outputs.size() == 1 ? " output matches" : " outputs match",
        fallbacks.empty() ? "" : "; ", fallbacks, ")");
  }
  // The first few mismatching outputs, by name.
  constexpr size_t kNamed = 3;
  std::vector<std::string> named;
  size_t mismatching = 0;
  for (const OutputComparison& c : outputs) {
    if (c.match) continue;
    if (++mismatching <= kNamed)
      named.push_back(absl::StrCat(OutputName(c), ": ", c.mismatched_elements,
                                   " / ", c.elements, " elements"));
  }
  if (mismatching > kNamed) named.push_back("...");
  return absl::StrCat(head, "MISMATCH in ", mismatching, " of ", outputs.size(),
                      " output", outputs.size() == 1 ? "" : "s", " (",
                      absl::StrJoin(named, ", "), ")",
                      fallbacks.empty() ? "" : "; ", fallbacks);
}

std::string VerifyReport::Text() const {
  std::string text = absl::StrCat(Summary(), "\n");
  for (const OutputComparison& c : outputs) {
    absl::StrAppend(&text, "  ", OutputName(c), " (", c.dtype, "[",
                    absl::StrJoin(c.sizes, ","), "]): ");
    if (!c.match && c.first_mismatch_index < 0) {
      absl::StrAppend(&text, "not compared\n");  // `error` says why
      continue;
    }
    if (c.match) {
      absl::StrAppend(&text, "match (greatest absolute difference ",
                      Number(c.max_abs_error), ", relative ",
                      Number(c.max_rel_error), "; atol ", Number(c.atol),
                      ", rtol ", Number(c.rtol), ")\n");
      continue;
    }
    const double percent =
        c.elements > 0 ? 100.0 * static_cast<double>(c.mismatched_elements) /
                             static_cast<double>(c.elements)
                       : 0;
    absl::StrAppend(
        &text, "MISMATCH\n", "    Mismatched elements: ", c.mismatched_elements,
        " / ", c.elements, " (", absl::StrFormat("%.1f", percent), "%)\n",
        "    Greatest absolute difference: ", Number(c.max_abs_error),
        " at index ", IndexText(c.max_abs_error_index), " (up to ",
        Number(c.atol), " allowed)\n",
        "    Greatest relative difference: ", Number(c.max_rel_error),
        " at index ", IndexText(c.max_rel_error_index), " (up to ",
        Number(c.rtol), " allowed)\n");
    if (c.first_mismatch_index >= 0)
      absl::StrAppend(&text, "    First mismatch at index ",
                      IndexText(UnravelIndex(c.first_mismatch_index, c.sizes)),
                      ": expected ", Number(c.expected_value), ", got ",
                      Number(c.actual_value), "\n");
  }
  return text;
}

// Replaces generated inputs of `method` with the caller's values.
absl::Status ApplyGivenInputs(const Method& method,
                              const std::vector<GivenInput>& given,
                              std::vector<HostTensor>& inputs) {
  for (const GivenInput& value : given) {
    if (value.method != method.name) continue;
    size_t position = 0;
    bool found = false;
    for (const Node& node : method.nodes) {
      if (node.kind != NodeKind::kInput ||
          node.input_kind != InputKind::kUserInput)
        continue;
      if (node.name == value.input) {
        found = true;
        break;
      }
      ++position;
    }
    if (!found || position >= inputs.size())
      return absl::InvalidArgumentError(absl::StrCat(
          "method '", method.name, "' has no user input '", value.input, "'"));
    HostTensor& slot = inputs[position];
    if (value.dtype != slot.dtype || value.sizes != slot.sizes)
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", value.input, "' of method '", method.name, "' is ",
          AsAbsl(DTypeName(slot.dtype)), "[", absl::StrJoin(slot.sizes, ","),
          "], the value given is ", AsAbsl(DTypeName(value.dtype)), "[",
          absl::StrJoin(value.sizes, ","), "]"));
    if (value.data.size() != slot.data.size())
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", value.input, "' of method '", method.name, "' needs ",
          slot.data.size(), " bytes, the value given has ", value.data.size()));
    std::memcpy(slot.data.data(), value.data.data(), value.data.size());
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<VerifyReport> VerifyUnguarded(const Program& original,
                                             const Program& lowered,
                                             const VerifyOptions& options) {
  absl::StatusOr<ExecutionMode> mode = ChooseMode(lowered, options.device);
  if (!mode.ok()) return mode.status();
  int64_t given_bytes = 0;
  for (const GivenInput& given : options.inputs)
    given_bytes =
        CheckedAdd(given_bytes, static_cast<int64_t>(given.data.size()))
            .value_or(std::numeric_limits<int64_t>::max());
  if (absl::StatusOr<int64_t> bytes =
          VerifyBytes(original, lowered, given_bytes, options.limits);
      !bytes.ok())
    return bytes.status();
  CancelScope cancel_scope(options.cancel != nullptr ? options.cancel
                                                     : CurrentCancelToken());
  auto cancelled = [&] {
    return (options.keep_going && !options.keep_going()) || StopRequested();
  };

  VerifyReport report;
  report.device = std::string(ExecutionModeName(*mode));
  // Host fallbacks inside device delegates (only the lowered program's run
  // has any: eager execution runs everything in host memory).
  HostFallbackScope fallback_scope;
  auto take_fallbacks = [&] {
    report.host_fallbacks.clear();
    for (const auto& [op, count] : fallback_scope.counts())
      report.host_fallbacks.push_back({op, count});
  };
  auto fail = [&](absl::string_view what, const absl::Status& status) {
    report.ok = false;
    report.error = absl::StrCat(what, status.message());
    take_fallbacks();
    return report;
  };
  if (cancelled()) return absl::CancelledError("verification cancelled");
  absl::StatusOr<std::unique_ptr<Executor>> eager =
      Executor::Load(original, ExecutionMode::kEager, options.seed);
  if (!eager.ok()) return fail("original program: ", eager.status());
  if (cancelled()) return absl::CancelledError("verification cancelled");
  absl::StatusOr<std::unique_ptr<Executor>> backend =
      Executor::Load(lowered, *mode, options.seed);
  if (!backend.ok()) return fail("", backend.status());

  for (const GivenInput& given : options.inputs) {
    bool found = false;
    for (const Method& method : original.methods)
      if (method.name == given.method) found = true;
    if (!found)
      return absl::InvalidArgumentError(
          absl::StrCat("input value for method '", given.method,
                       "', which the program does not have"));
  }
  for (const Method& method : original.methods) {
    if (cancelled()) return absl::CancelledError("verification cancelled");
    std::vector<HostTensor> inputs = GenerateUserInputs(method, options.seed);
    if (cancelled()) return absl::CancelledError("verification cancelled");
    if (absl::Status given = ApplyGivenInputs(method, options.inputs, inputs);
        !given.ok())
      return given;
    // Reports `step` of this method around `run`.
    auto step = [&](std::string_view name, auto&& run) {
      if (options.progress)
        options.progress(StageEvent{name, method.name, false, 0});
      auto start = std::chrono::steady_clock::now();
      auto r = run();
      if (options.progress)
        options.progress(
            StageEvent{name, method.name, true,
                       std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count()});
      return r;
    };
    absl::StatusOr<std::vector<HostTensor>> expected = step("eager_run", [&] {
      return (*eager)->Run(method.name, inputs, options.keep_going);
    });
    if (expected.status().code() == absl::StatusCode::kCancelled)
      return expected.status();
    if (!expected.ok()) return fail("original program: ", expected.status());
    if (absl::Status placed =
            CheckPlacedAsLowered(lowered, method.name, **backend);
        !placed.ok())
      return fail("", placed);
    absl::StatusOr<std::vector<HostTensor>> actual = step("lowered_run", [&] {
      return (*backend)->Run(method.name, inputs, options.keep_going);
    });
    if (actual.status().code() == absl::StatusCode::kCancelled)
      return actual.status();
    if (!actual.ok()) return fail("", actual.status());
    // The comparison returns early on a shape mismatch: it is a step around
    // its whole loop, reported finished only when it got through.
    auto compare_start = std::chrono::steady_clock::now();
    if (options.progress)
      options.progress(StageEvent{"compare", method.name, false, 0});
    if (expected->size() != actual->size()) {
      return fail(
          "", absl::InvalidArgumentError(absl::StrCat(
                  "method '", method.name, "' returns ", actual->size(),
                  " outputs after lowering, ", expected->size(), " before")));
    }
    for (size_t i = 0; i < expected->size(); ++i) {
      const HostTensor& e = (*expected)[i];
      const HostTensor& a = (*actual)[i];
      if (e.dtype != a.dtype || e.sizes != a.sizes) {
        OutputComparison c;
        c.method = method.name;
        c.output_index = static_cast<int>(i);
        c.dtype = std::string(DTypeName(e.dtype));
        c.sizes = e.sizes;
        report.outputs.push_back(c);
        return fail("", absl::InvalidArgumentError(absl::StrCat(
                            "method '", method.name, "' output ", i, " is ",
                            AsAbsl(DTypeName(a.dtype)), "[",
                            absl::StrJoin(a.sizes, ","), "] after lowering, ",
                            AsAbsl(DTypeName(e.dtype)), "[",
                            absl::StrJoin(e.sizes, ","), "] before")));
      }
      report.outputs.push_back(
          Compare(method.name, static_cast<int>(i), e, a, report.device));
      if (options.keep_outputs) {
        GivenInput kept;
        kept.method = method.name;
        kept.input = absl::StrCat("output", i);
        kept.dtype = a.dtype;
        kept.sizes = a.sizes;
        kept.data.assign(reinterpret_cast<const char*>(a.data.data()),
                         a.data.size());
        report.lowered_outputs.push_back(std::move(kept));
      }
    }
    if (options.progress)
      options.progress(
          StageEvent{"compare", method.name, true,
                     std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::steady_clock::now() - compare_start)
                         .count()});
  }
  report.ok = true;
  for (const OutputComparison& c : report.outputs)
    report.ok = report.ok && c.match;
  take_fallbacks();
  return report;
}

}  // namespace

absl::StatusOr<VerifyReport> VerifyPrograms(const Program& original,
                                            const Program& lowered,
                                            const VerifyOptions& options) {
  try {
    return VerifyUnguarded(original, lowered, options);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory while verifying");
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("verification failed with an exception: ", e.what()));
  }
}

}  // namespace ferry
