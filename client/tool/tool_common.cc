#include "client/tool/tool_common.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/tool/inputs_json.h"
#include "ferry/file.h"
#include "ferry/v1/program.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "passes/pipeline.h"
#include "passes/report_io.h"

namespace ferry::tool {

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
  absl::StatusOr<std::string> read = ReadFile(path);
  if (!read.ok()) {
    std::fprintf(stderr, "ferry: %s\n",
                 std::string(read.status().message()).c_str());
    return false;
  }
  const std::string& bytes = *read;
  bool ok = false;
  switch (FormatFromPath(path)) {
    case FileFormat::kBinary:
      ok = inputs->ParseFromString(bytes);
      break;
    case FileFormat::kJson:
      // Base64 data or readable numbers (client/tool/inputs_json.h).
      if (absl::Status parsed = ParseInputsJson(path, bytes, inputs);
          !parsed.ok()) {
        std::fprintf(stderr, "ferry: %s\n",
                     std::string(parsed.message()).c_str());
        return false;
      }
      return true;
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

void PrintLowerReport(v1::LowerReport report, const std::string& file,
                      const std::string& format, bool timings) {
  if (!timings) report.mutable_stats()->clear_passes();
  if (format == "json") {
    std::printf("%s\n", ReportJson(report).c_str());
    return;
  }
  std::fputs(ReportText(LowerResultFromProto(report), file).c_str(), stderr);
  for (const v1::PassStats& pass : report.stats().passes()) {
    std::fprintf(stderr, "  pass %s: %lld us\n", pass.name().c_str(),
                 static_cast<long long>(pass.micros()));
  }
}

}  // namespace ferry::tool
