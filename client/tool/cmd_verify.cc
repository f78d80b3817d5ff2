// ferry verify FILE: lower FILE, execute the result on a backend and compare
// it with eager host execution of the original program (runtime/verify.h).
// With --original ORIG, FILE is an already-lowered program and ORIG the
// program it came from. With --server ADDR a ferryd lowers and verifies.
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/tool/progress.h"
#include "client/tool/remote.h"
#include "client/tool/shared_options.h"
#include "client/tool/status_report.h"
#include "client/tool/tool_common.h"
#include "ferry/v1/program.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "passes/diagnostics.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"
#include "passes/report_io.h"
#include "passes/resource_limits.h"
#include "passes/validate.h"
#include "runtime/ops/backend_ops.h"
#include "runtime/verify.h"
#include "runtime/verify_io.h"

namespace ferry::tool {
namespace {

std::string VerifyUsage() {
  return "usage: ferry verify [--device=auto|sim|cuda] [--seed N] "
         "[--report=text|json]\n"
         "                    [--max-verify-bytes=BYTES] "
         "[--max-tensor-bytes=BYTES]\n"
         "                    [--format=text|binary|json] [--original ORIG] "
         "[--inputs INPUTS] [--dump-outputs=OUT]\n"
         "                    [lowering options] [--server ADDR ...] FILE\n"
         "Lowers FILE (a LowerRequest, or a bare Program with default "
         "options), runs the\n"
         "result on the device (auto: cuda where a GPU is visible, else sim) "
         "and compares\n"
         "every method output with eager host execution of the original "
         "program, on the\n"
         "same inputs (generated from the seed, default 0). With --original "
         "ORIG, FILE is\n"
         "an already-lowered program and ORIG the program it was lowered "
         "from.\n"
         "INPUTS (a ferry.v1.InputSet: text, binary or JSON by extension; "
         "in JSON, \"numbers\"\nnested by shape or flat may replace "
         "\"data\", README.md) gives values for some\ninputs; the others "
         "come from the seed. "
         "--dump-outputs=OUT writes the\nlowered program's outputs as an "
         "InputSet (inputs named output0, output1, ...).\n"
         "Exit 0 when the outputs match, 1 on a mismatch, a runtime error or "
         "a compile\n"
         "error, 2 on usage or unreadable input, 3 when the device is not "
         "available;\n'ferry --help' has every code.\n"
         "--max-verify-bytes (2GiB) bounds what both runs may allocate "
         "together, and\n--max-tensor-bytes (1GiB) any one tensor, as "
         "ferryd's flags of those names do\n(sizes like 4GiB or 500MB); "
         "in-process only.\n\n" +
         ProgressFlagHelp() + LoweringFlagsHelp() + "\n" + RemoteFlagsHelp();
}

// Imports and validates a wire program; prints the diagnostics on failure.
bool ImportChecked(const v1::Program& proto, const std::string& file,
                   Program* program) {
  Diagnostics diagnostics;
  *program = ImportProgram(proto, diagnostics);
  if (!diagnostics.HasErrors()) ValidateProgram(*program, diagnostics);
  if (diagnostics.HasErrors()) {
    AttachNodeSources(proto, diagnostics);
    std::fputs(FormatDiagnosticsText(diagnostics, file).c_str(), stderr);
    return false;
  }
  return true;
}

}  // namespace

int RunVerify(const Args& args) {
  SharedOptions shared;
  std::string& file = shared.file;
  std::string& format = shared.format;
  std::string& report = shared.report;
  v1::LowerOptions& overrides = shared.overrides;
  RemoteOptions& remote = shared.remote;
  std::string original_file, inputs_file, dump_file, device = "auto";
  std::string progress_mode = "auto";
  uint64_t seed = 0;
  std::optional<int64_t> max_verify_bytes, max_tensor_bytes;
  CommandFlags flags("verify", VerifyUsage());
  flags.app().add_option_function<std::string>(
      "--seed", [&seed](const std::string& value) {
        if (!absl::SimpleAtoi(value, &seed)) {
          throw CLI::ValidationError("--seed needs an unsigned integer");
        }
      });
  auto byte_size = [](const char* name, std::optional<int64_t>& field) {
    return [name, &field](const std::string& value) {
      absl::StatusOr<int64_t> bytes = ParseByteSize(value);
      if (!bytes.ok() || *bytes < 1) {
        throw CLI::ValidationError(
            absl::StrCat(name,
                         " needs a byte size such as 4GiB or 500MB, "
                         "not '",
                         value, "'"));
      }
      field = *bytes;
    };
  };
  flags.app().add_option_function<std::string>(
      "--max-verify-bytes", byte_size("--max-verify-bytes", max_verify_bytes));
  flags.app().add_option_function<std::string>(
      "--max-tensor-bytes", byte_size("--max-tensor-bytes", max_tensor_bytes));
  flags.app().add_option("--original", original_file);
  flags.app().add_option("--inputs", inputs_file);
  flags.app().add_option("--dump-outputs", dump_file);
  flags.app().add_option("--device", device);
  AddProgressFlag(flags.app(), progress_mode);
  AddSharedOptions(flags, shared);
  if (std::optional<int> exit = flags.Parse(args)) return *exit;
  ProgressPrinter progress("verify", progress_mode);
  VerifyOptions options;
  options.seed = seed;
  options.progress = progress.Stages();
  if (max_verify_bytes) options.limits.max_verify_bytes = *max_verify_bytes;
  if (max_tensor_bytes) options.limits.max_tensor_bytes = *max_tensor_bytes;
  if (device == "auto") {
    options.device = VerifyDevice::kAuto;
  } else if (device == "sim") {
    options.device = VerifyDevice::kSim;
  } else if (device == "cuda") {
    options.device = VerifyDevice::kCuda;
  } else {
    static const std::string kDevices[] = {"auto", "sim", "cuda"};
    std::fprintf(
        stderr, "ferry verify: %s\n",
        WithDidYouMean("unknown --device '" + device + "' (auto, sim, cuda)",
                       device, kDevices)
            .c_str());
    return kExitUsage;
  }
  if (file.empty() || (report != "text" && report != "json")) {
    std::fputs(VerifyUsage().c_str(), stderr);
    return kExitUsage;
  }
  options.keep_outputs = !dump_file.empty();
  if (remote.enabled() && (!inputs_file.empty() || !dump_file.empty())) {
    std::fprintf(
        stderr,
        "ferry verify: --inputs and --dump-outputs run in-process only "
        "(no --server)\n");
    return kExitUsage;
  }
  if (remote.enabled() && (max_verify_bytes || max_tensor_bytes)) {
    std::fprintf(stderr,
                 "ferry verify: --max-verify-bytes and --max-tensor-bytes "
                 "run in-process only;\na ferryd's limits are its own (ferry "
                 "caps --server ADDR shows them)\n");
    return kExitUsage;
  }
  if (remote.enabled() && !original_file.empty()) {
    std::fprintf(
        stderr,
        "ferry verify: --original runs in-process only (no --server)\n");
    return kExitUsage;
  }

  v1::InputSet given;
  if (!inputs_file.empty()) {
    if (!LoadInputSet(inputs_file, &given)) return kExitUsage;
    for (const v1::InputValue& value : given.values()) {
      GivenInput input;
      input.method = value.method();
      input.input = value.input();
      input.dtype = DTypeFromProto(value.spec().dtype());
      input.sizes.assign(value.spec().sizes().begin(),
                         value.spec().sizes().end());
      input.data = value.data();
      options.inputs.push_back(std::move(input));
    }
  }

  v1::LowerRequest request;
  bool bare = false;
  if (!LoadRequest(file, format, &request, &bare)) return kExitUsage;

  if (remote.enabled()) {
    if (!original_file.empty()) {
      std::fprintf(stderr,
                   "ferry verify: --original is not supported with "
                   "--server\n");
      return kExitUsage;
    }
    request.mutable_options()->MergeFrom(overrides);
    return RemoteVerify(remote, request, file, device, seed, report, progress);
  }

  Program original, lowered;
  if (!original_file.empty()) {
    // FILE is already lowered; ORIG is what it was lowered from.
    v1::LowerRequest original_request;
    if (!LoadRequest(original_file, format, &original_request, &bare))
      return kExitUsage;
    if (!ImportChecked(original_request.program(), original_file, &original) ||
        !ImportChecked(request.program(), file, &lowered))
      return kExitErrors;
  } else {
    request.mutable_options()->MergeFrom(overrides);
    if (!ImportChecked(request.program(), file, &original)) return kExitErrors;
    absl::StatusOr<LowerResult> result = Lower(
        request, {}, {}, DeclaredBackendOperators(), {}, {}, options.progress);
    if (!result.ok()) return ReportStatus("verify", file, result.status());
    if (!result->ok) {
      std::fputs(ReportText(*result, file).c_str(), stderr);
      return kExitErrors;
    }
    lowered = std::move(result->program);
  }

  absl::StatusOr<VerifyReport> verified =
      VerifyPrograms(original, lowered, options);
  if (!verified.ok()) return ReportStatus("verify", file, verified.status());
  if (!dump_file.empty()) {
    v1::InputSet dumped;
    for (const GivenInput& out : verified->lowered_outputs) {
      v1::InputValue* value = dumped.add_values();
      value->set_method(out.method);
      value->set_input(out.input);
      value->mutable_spec()->set_dtype(DTypeToProto(out.dtype));
      for (int64_t s : out.sizes) value->mutable_spec()->add_sizes(s);
      value->set_data(out.data);
    }
    std::string bytes;
    switch (FormatFromPath(dump_file)) {
      case FileFormat::kBinary:
        bytes = dumped.SerializeAsString();
        break;
      case FileFormat::kJson:
        (void)google::protobuf::util::MessageToJsonString(dumped, &bytes);
        break;
      default:
        google::protobuf::TextFormat::PrintToString(dumped, &bytes);
    }
    if (!WriteOutput(dump_file, bytes)) return kExitUsage;
  }
  if (report == "json") {
    std::printf("%s\n", ReportJson(VerifyReportToProto(*verified)).c_str());
  } else {
    std::fputs(verified->Text().c_str(), stdout);
  }
  return verified->ok ? kExitOk : kExitErrors;
}

}  // namespace ferry::tool
