// The fuzz targets' bodies (fuzz_entries.h).
//
// Oracles, beyond "does not crash, leak, hang or allocate without bound":
//  - schema: a parsed schema answers its queries consistently (every
//    argument is found by its name; an aliased result names an argument);
//  - pipeline: export(import(p)) imports cleanly and exporting again gives
//    the same bytes; a program Lower() accepts, once exported, imports and
//    validates without errors;
//  - verify: a program Lower() produced runs on sim wherever the original
//    runs eagerly, and computes the same results; a program verified as
//    given (its own "lowered" form) may fail in any way but a crash;
//  - pipeline and verify: neither Lower() nor VerifyPrograms() ends with
//    INTERNAL (an exception or a broken invariant inside);
//  - node: wire::NodeReader reads nothing protobuf refuses, and what it
//    reads is protobuf's parse of the same bytes.
#include "tests/fuzz/fuzz_entries.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "ferry/v1/program.pb.h"
#include "passes/diagnostics.h"
#include "passes/ir.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"
#include "passes/resource_limits.h"
#include "passes/schema.h"
#include "passes/validate.h"
#include "passes/wire_node.h"
#include "runtime/cancel.h"
#include "runtime/verify.h"

namespace ferry::fuzz {
namespace {

// A broken invariant: print it and abort, so that libFuzzer records the
// input and the replay test fails.
[[noreturn]] void Finding(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "ferry fuzz finding: %.*s\n%.*s\n",
               static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// FERRY_FUZZ_TRACE=1: one line per stage an input reaches, to see what a
// corpus exercises (docs/fuzzing.md).
void Trace(std::string_view stage) {
  static const bool enabled = std::getenv("FERRY_FUZZ_TRACE") != nullptr;
  if (enabled)
    std::fprintf(stderr, "fuzz: %.*s\n", static_cast<int>(stage.size()),
                 stage.data());
}

std::string_view AsBytes(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

std::string Deterministic(const v1::Program& program) {
  return SerializeProgram(program, FileFormat::kBinary);
}

// Parses the fuzzer's bytes the way `ferry` and the service read a binary
// file; false when they are no request.
bool ParseInput(const uint8_t* data, size_t size, v1::LowerRequest* request) {
  bool bare = false;
  return ParseRequest(AsBytes(data, size), FileFormat::kBinary, "fuzz input",
                      request, &bare)
      .ok();
}

// Imports and validates `proto`; true when both are clean.
bool ImportValid(const v1::Program& proto, Program* program) {
  Diagnostics diagnostics;
  *program = ImportProgram(proto, diagnostics);
  if (diagnostics.HasErrors()) return false;
  return ValidateProgram(*program, diagnostics);
}

// The library's own resource limits (resource_limits.h), smaller than the
// defaults so that everything a fuzzed request may make Ferry allocate fits
// well inside libFuzzer's -rss_limit_mb/-malloc_limit_mb (2 GiB, with
// AddressSanitizer's overhead): an allocation that reaches libFuzzer's cap
// is a limit that was not checked before allocating.
ResourceLimits FuzzLimits() {
  ResourceLimits limits;
  limits.max_tensor_bytes = int64_t{64} << 20;
  limits.max_verify_bytes = int64_t{256} << 20;
  return limits;
}

// Verification of a fuzzed program stops after this long, as a deadline
// stops it in the service; a step that ignores the deadline shows up as a
// libFuzzer timeout (-timeout, 10 s in scripts/fuzz).
constexpr auto kVerifyBudget = std::chrono::seconds(2);

// VerifyPrograms on sim; nullopt when it stopped with a status (cancelled at
// the deadline, over a resource limit). INTERNAL is a finding: no input may
// make the library throw or break an invariant.
std::optional<VerifyReport> VerifyOnSim(const Program& original,
                                        const Program& lowered,
                                        const char* what) {
  const auto stop = std::chrono::steady_clock::now() + kVerifyBudget;
  CancelToken deadline;
  deadline.SetDeadline(stop);
  VerifyOptions options;
  options.device = VerifyDevice::kSim;
  options.limits = FuzzLimits();
  options.cancel = &deadline;
  options.keep_going = [stop] {
    return std::chrono::steady_clock::now() < stop;
  };
  absl::StatusOr<VerifyReport> report =
      VerifyPrograms(original, lowered, options);
  if (!report.ok()) {
    Trace(absl::StrCat(what, ": ", report.status().ToString()));
    if (report.status().code() == absl::StatusCode::kInternal)
      Finding("verification failed internally", report.status().ToString());
    return std::nullopt;
  }
  Trace(absl::StrCat(what, ": ", report->Summary()));
  return *std::move(report);
}

// Lower() with the fuzz limits; INTERNAL is a finding, as above.
absl::StatusOr<LowerResult> LowerChecked(const v1::LowerRequest& request) {
  absl::StatusOr<LowerResult> lowered = Lower(request, {}, FuzzLimits());
  if (!lowered.ok() && lowered.status().code() == absl::StatusCode::kInternal)
    Finding("Lower failed internally", lowered.status().ToString());
  return lowered;
}

// LowerWire, which ferryd runs on a unary Lower's bytes, reads them node by
// node; it must give what Lower gives for the request protobuf parses from
// them (the same status, or the same diagnostics and program), and never
// fail internally.
void CheckLowerWire(const uint8_t* data, size_t size) {
  const std::string_view bytes = AsBytes(data, size);
  absl::StatusOr<LowerResult> from_wire = LowerWire(bytes, {}, FuzzLimits());
  if (!from_wire.ok() &&
      from_wire.status().code() == absl::StatusCode::kInternal)
    Finding("LowerWire failed internally", from_wire.status().ToString());
  v1::LowerRequest parsed;
  if (!parsed.ParseFromArray(data, static_cast<int>(size))) {
    if (from_wire.ok())
      Finding("LowerWire lowered bytes that are no LowerRequest", "");
    return;
  }
  // (Not the pipeline's own `lowered`: that may have read the bytes as a
  // bare Program.)
  absl::StatusOr<LowerResult> expected = Lower(parsed, {}, FuzzLimits());
  if (expected.ok() != from_wire.ok() ||
      (!expected.ok() &&
       expected.status().code() != from_wire.status().code())) {
    Finding("LowerWire and Lower disagree on the status",
            absl::StrCat(expected.status().ToString(), " / ",
                         from_wire.status().ToString()));
    return;
  }
  if (!expected.ok()) return;
  if (expected->ok != from_wire->ok ||
      FormatDiagnosticsText(expected->diagnostics, "request") !=
          FormatDiagnosticsText(from_wire->diagnostics, "request"))
    Finding("LowerWire and Lower disagree on the diagnostics",
            FormatDiagnosticsText(from_wire->diagnostics, "request"));
  if (!expected->ok) return;
  v1::Program a, b;
  ExportProgram(expected->program, &a);
  ExportProgram(from_wire->program, &b);
  if (Deterministic(a) != Deterministic(b))
    Finding("LowerWire and Lower lower to different programs", ToText(b));
}

}  // namespace

int FuzzSchema(const uint8_t* data, size_t size) {
  absl::StatusOr<OpSchema> schema = ParseSchema(AsBytes(data, size));
  if (!schema.ok()) return 0;
  (void)schema->QualifiedName();
  const int arguments = static_cast<int>(schema->arguments.size());
  for (int i = 0; i < arguments; ++i) {
    const std::string& name = schema->arguments[i].name;
    const int found = schema->ArgumentIndex(name);
    if (found < 0 || found > i ||
        schema->arguments[found].name != schema->arguments[i].name)
      Finding("ArgumentIndex does not find an argument by its name", name);
  }
  for (int written : schema->WrittenArguments())
    if (written < 0 || written >= arguments)
      Finding("WrittenArguments returned no argument index",
              std::to_string(written));
  for (int r = 0; r < static_cast<int>(schema->returns.size()); ++r) {
    std::optional<int> aliased = schema->AliasedArgument(r);
    if (aliased && (*aliased < 0 || *aliased >= arguments))
      Finding("AliasedArgument returned no argument index",
              std::to_string(*aliased));
    // A result in an alias set aliases an argument of that set, and a
    // written result a written argument (`Tensor(a) x -> Tensor(b)` and
    // `Tensor(a) x -> Tensor(a!)` do not parse).
    const std::optional<AliasInfo>& alias = schema->returns[r].alias;
    if (!alias || alias->set == "*") continue;
    if (!aliased)
      Finding("a result's alias set is no argument's", AsBytes(data, size));
    const std::optional<AliasInfo>& owner = schema->arguments[*aliased].alias;
    if (!owner || owner->set != alias->set ||
        (alias->is_write && !owner->is_write))
      Finding(
          "a result aliases an argument of another set, or a written "
          "result an argument that is not written",
          AsBytes(data, size));
  }
  return 0;
}

int FuzzPipeline(const uint8_t* data, size_t size) {
  v1::LowerRequest request;
  if (!ParseInput(data, size, &request)) return 0;

  // Import + validation, and the export/import round trip.
  Diagnostics diagnostics;
  Program program = ImportProgram(request.program(), diagnostics);
  if (!diagnostics.HasErrors()) {
    ValidateProgram(program, diagnostics);
    v1::Program exported;
    ExportProgram(program, &exported);
    Diagnostics again;
    Program reimported = ImportProgram(exported, again);
    if (again.HasErrors())
      Finding("an exported program does not import",
              FormatDiagnosticsText(again, "exported"));
    v1::Program exported_again;
    ExportProgram(reimported, &exported_again);
    if (Deterministic(exported) != Deterministic(exported_again))
      Finding("export(import(export(p))) differs from export(p)",
              ToText(exported));
  }

  // The whole pipeline; what it accepts must be a valid program.
  absl::StatusOr<LowerResult> lowered = LowerChecked(request);
  CheckLowerWire(data, size);
  if (!lowered.ok() || !lowered->ok) return 0;
  v1::Program out;
  ExportProgram(lowered->program, &out);
  Diagnostics out_diagnostics;
  Program reread = ImportProgram(out, out_diagnostics);
  if (!out_diagnostics.HasErrors()) ValidateProgram(reread, out_diagnostics);
  if (out_diagnostics.HasErrors())
    Finding("a lowered program does not import and validate",
            FormatDiagnosticsText(out_diagnostics, "lowered"));
  return 0;
}

int FuzzVerify(const uint8_t* data, size_t size) {
  v1::LowerRequest request;
  if (!ParseInput(data, size, &request)) return Trace("no request"), 0;
  Program original;
  if (!ImportValid(request.program(), &original))
    return Trace("does not import and validate"), 0;

  // The program as a client could hand it over already lowered
  // (`ferry verify --original`): hostile modules, delegates and plans.
  VerifyOnSim(original, original, "as given");

  absl::StatusOr<LowerResult> lowered = LowerChecked(request);
  if (!lowered.ok() || !lowered->ok) return Trace("does not lower"), 0;
  std::optional<VerifyReport> report =
      VerifyOnSim(original, lowered->program, "lowered");
  if (!report) return 0;
  // `ferry check` clean (and lowered) means `ferry verify` can run it: an
  // error of the lowered program, where the original ran, is validation or
  // lowering letting through what the runtime refuses.
  if (!report->error.empty() &&
      !report->error.starts_with("original program: "))
    Finding("the runtime refuses a program that Lower() produced",
            report->error);
  // Lowering preserves what a program computes (sim runs host kernels on
  // both sides, with the same inputs).
  if (report->error.empty() && !report->ok)
    Finding("the lowered program computes other results", report->Summary());
  return 0;
}

int FuzzNode(const uint8_t* data, size_t size) {
  bool read = false;
  const std::string differences =
      wire::DifferenceFromProtobuf(AsBytes(data, size), &read);
  if (!differences.empty())
    Finding("NodeReader reads a node otherwise than protobuf", differences);
  return Trace(read ? "read in place" : "left to protobuf"), 0;
}

std::span<const Target> Targets() {
  static constexpr Target kTargets[] = {
      {"schema", &FuzzSchema},
      {"pipeline", &FuzzPipeline},
      {"verify", &FuzzVerify},
      {"node", &FuzzNode},
  };
  return kTargets;
}

const Target* FindTarget(std::string_view name) {
  for (const Target& target : Targets())
    if (target.name == name) return &target;
  return nullptr;
}

}  // namespace ferry::fuzz
