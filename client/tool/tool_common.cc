#include "client/tool/tool_common.h"

#include <cstdio>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ferry/v1/program.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace ferry::tool {

bool ParseFlag(std::string_view arg, std::string_view name,
               std::string* value) {
  if (arg.substr(0, name.size()) != name) return false;
  std::string_view rest = arg.substr(name.size());
  if (rest.empty()) {
    value->clear();
    return true;
  }
  if (rest[0] != '=') return false;
  *value = std::string(rest.substr(1));
  return true;
}

bool LoadRequest(const std::string& path, const std::string& format_name,
                 v1::LowerRequest* request, bool* was_bare_program) {
  FileFormat format = FileFormat::kUnknown;
  if (!format_name.empty()) {
    format = ParseFormatName(format_name);
    if (format == FileFormat::kUnknown) {
      std::fprintf(stderr,
                   "ferry: unknown --format '%s' (text, binary, json)\n",
                   format_name.c_str());
      return false;
    }
  }
  absl::Status status =
      ReadRequestFile(path, format, request, was_bare_program);
  if (!status.ok()) {
    std::fprintf(stderr, "ferry: %s\n", std::string(status.message()).c_str());
    return false;
  }
  return true;
}

bool LoadInputSet(const std::string& path, v1::InputSet* inputs) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "ferry: %s: cannot open file\n", path.c_str());
    return false;
  }
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  bool ok = false;
  switch (FormatFromPath(path)) {
    case FileFormat::kBinary:
      ok = inputs->ParseFromString(bytes);
      break;
    case FileFormat::kJson:
      ok = google::protobuf::util::JsonStringToMessage(bytes, inputs).ok();
      break;
    case FileFormat::kText:
    case FileFormat::kUnknown:
      ok = google::protobuf::TextFormat::ParseFromString(bytes, inputs);
      break;
  }
  if (!ok)
    std::fprintf(stderr, "ferry: %s: not a ferry.v1.InputSet\n", path.c_str());
  return ok;
}

bool WriteOutput(const std::string& path, const std::string& bytes) {
  if (path == "-" || path.empty()) {
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    return std::fflush(stdout) == 0;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "ferry: %s: cannot write\n", path.c_str());
    return false;
  }
  return true;
}

bool ApplyLoweringFlag(std::string_view arg, v1::LowerOptions* options,
                       std::string* error) {
  std::string value;
  auto set_flag = [&](v1::MethodFlag* flag) {
    if (value.empty())
      flag->set_default_value(true);
    else
      (*flag->mutable_per_method())[value] = true;
  };
  if (ParseFlag(arg, "--skip-h2d-inputs", &value)) {
    set_flag(options->mutable_skip_h2d_for_method_inputs());
    return true;
  }
  if (ParseFlag(arg, "--skip-d2h-outputs", &value)) {
    set_flag(options->mutable_skip_d2h_for_method_outputs());
    return true;
  }
  if (arg == "--error-on-per-call-copies") {
    options->set_error_on_per_call_copies(true);
    return true;
  }
  if (ParseFlag(arg, "--constant-staging", &value)) {
    if (value == "at-load")
      options->set_constant_staging(v1::AT_LOAD);
    else if (value == "per-call")
      options->set_constant_staging(v1::PER_CALL);
    else
      *error = "--constant-staging takes at-load or per-call";
    return true;
  }
  if (arg == "--no-device-memory-planning") {
    options->set_enable_non_cpu_memory_planning(false);
    return true;
  }
  if (arg == "--no-alloc-graph-input") {
    options->set_alloc_graph_input(false);
    return true;
  }
  if (arg == "--no-alloc-graph-output") {
    options->set_alloc_graph_output(false);
    return true;
  }
  if (ParseFlag(arg, "--partitioner", &value)) {
    v1::PartitionerOptions* p = options->mutable_partitioner();
    if (value == "tag")
      p->set_kind(v1::BY_TAG);
    else if (value == "capability")
      p->set_kind(v1::BY_CAPABILITY);
    else if (value == "none")
      p->set_kind(v1::NONE);
    else
      *error = "--partitioner takes tag, capability or none";
    return true;
  }
  if (ParseFlag(arg, "--target-device", &value)) {
    if (value.empty()) *error = "--target-device needs a device, e.g. cuda:0";
    options->mutable_partitioner()->set_target_device(value);
    return true;
  }
  if (ParseFlag(arg, "--tag-target", &value)) {
    size_t eq = value.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == value.size()) {
      *error = "--tag-target takes TAG=DEVICE";
    } else {
      (*options->mutable_partitioner()
            ->mutable_tag_targets())[value.substr(0, eq)] =
          value.substr(eq + 1);
    }
    return true;
  }
  if (ParseFlag(arg, "--backend", &value)) {
    options->mutable_partitioner()->set_backend(value);
    return true;
  }
  return false;
}

std::string LoweringFlagsHelp() {
  return "lowering options (override the request's):\n"
         "  --skip-h2d-inputs[=METHOD]    inputs arrive on their device\n"
         "  --skip-d2h-outputs[=METHOD]   outputs stay on their device\n"
         "  --error-on-per-call-copies    per-call-copy warnings become "
         "errors\n"
         "  --constant-staging=at-load|per-call\n"
         "  --no-device-memory-planning   record placements only\n"
         "  --no-alloc-graph-input        do not plan method inputs\n"
         "  --no-alloc-graph-output       do not plan method outputs\n"
         "  --partitioner=tag|capability|none\n"
         "  --target-device=DEV           capability partitions' device "
         "(cuda:0)\n"
         "  --tag-target=TAG=DEV          device of a tag's partition\n"
         "  --backend=ID                  backend id of new modules\n"
         "  --allow-op OP                 capability partitioner claims only "
         "these (repeatable)\n"
         "  --deny-op OP                  never claimed, stays on the host, "
         "e.g. aten::relu_ (repeatable)\n";
}

}  // namespace ferry::tool
