// Lowers a program on a Ferry server through libferry_client:
//   lower_example HOST:PORT FILE
// FILE is a LowerRequest or a bare Program (then lowered with the default
// options), in text (.textproto, .txtpb), binary (.binpb, .pb) or JSON
// (.json) form: the examples/*.textproto files are LowerRequests.
// Exit: 0 lowered, 1 the program does not compile or the server refused the
// call (its status code, message and details on stderr), 2 usage or an
// unreadable FILE.
#include <iostream>
#include <string>

#include "absl/strings/match.h"
#include "ferry/client.h"
#include "ferry/file.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace {

constexpr char kUsage[] =
    "usage: lower_example HOST:PORT FILE\n"
    "  Lowers FILE (a ferry.v1.LowerRequest or Program: .textproto, .binpb,\n"
    "  .json) on the Ferry server at HOST:PORT (or unix:/path) and prints\n"
    "  its diagnostics and H2D copy count.\n";

// Why a call failed: its code, its message and the google.rpc details the
// server attached (ErrorInfo reason, BadRequest, QuotaFailure, RetryInfo,
// PreconditionFailure).
void PrintFailure(const absl::Status& status) {
  std::cerr << "lower_example: " << absl::StatusCodeToString(status.code())
            << ": " << status.message() << "\n";
  std::optional<google::rpc::Status> details = ferry::ErrorDetails(status);
  if (!details) return;
  for (const google::protobuf::Any& any : details->details()) {
    std::cerr << "  " << any.type_url() << ": ";
    google::rpc::ErrorInfo info;
    google::rpc::BadRequest bad;
    google::rpc::QuotaFailure quota;
    google::rpc::RetryInfo retry;
    google::rpc::PreconditionFailure precondition;
    if (any.UnpackTo(&info)) {
      std::cerr << info.ShortDebugString();
    } else if (any.UnpackTo(&bad)) {
      std::cerr << bad.ShortDebugString();
    } else if (any.UnpackTo(&quota)) {
      std::cerr << quota.ShortDebugString();
    } else if (any.UnpackTo(&retry)) {
      std::cerr << retry.ShortDebugString();
    } else if (any.UnpackTo(&precondition)) {
      std::cerr << precondition.ShortDebugString();
    }
    std::cerr << "\n";
  }
}

// Text-format errors are not printed: FILE is tried as two message types.
class Quiet final : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, int, const std::string&) override {}
};

// Parses `bytes` into `message` in the form the name of `path` says.
bool Parse(const std::string& path, const std::string& bytes,
           google::protobuf::Message* message) {
  if (absl::EndsWith(path, ".binpb") || absl::EndsWith(path, ".pb")) {
    return message->ParseFromString(bytes) &&
           message->GetReflection()->GetUnknownFields(*message).empty();
  }
  if (absl::EndsWith(path, ".json")) {
    return google::protobuf::util::JsonStringToMessage(bytes, message).ok();
  }
  Quiet quiet;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&quiet);
  return parser.ParseFromString(bytes, message);
}

// FILE as a LowerRequest, or as a bare Program with the default options.
absl::Status ReadRequest(const std::string& path,
                         ferry::v1::LowerRequest* request) {
  absl::StatusOr<std::string> bytes = ferry::ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  if (Parse(path, *bytes, request) && request->has_program()) {
    return absl::OkStatus();
  }
  request->Clear();
  if (Parse(path, *bytes, request->mutable_program())) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "'" + path +
      "' is not a ferry.v1.LowerRequest or Program (text, "
      ".binpb or .json)");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::string(argv[1]).empty() || argv[1][0] == '-') {
    std::cerr << kUsage;
    return 2;
  }
  ferry::v1::LowerRequest request;
  if (absl::Status read = ReadRequest(argv[2], &request); !read.ok()) {
    std::cerr << "lower_example: " << read.message() << "\n" << kUsage;
    return 2;
  }

  ferry::ClientOptions options;  // TLS, token, deadline, retries: client.h
  options.target = argv[1];
  auto client = ferry::Client::Create(options);
  if (!client.ok()) {
    PrintFailure(client.status());
    return 2;
  }
  auto lowered = (*client)->Lower(request);  // request errors: a status
  if (!lowered.ok()) {
    PrintFailure(lowered.status());
    return 1;
  }
  for (const auto& d : lowered->diagnostics())  // compile errors: the body
    std::cout << d.code() << ": " << d.message() << "\n";
  std::cout << (lowered->ok() ? "lowered" : "failed to compile") << ", "
            << lowered->stats().h2d_copies() << " H2D copies per call\n";
  return lowered->ok() ? 0 : 1;
}
