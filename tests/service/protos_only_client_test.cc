// A client written against the .proto files alone — none of Ferry's
// generated code or libraries: it parses proto/ferry/v1/compiler.proto at run
// time, builds requests as dynamic messages, and calls the real ferryd binary
// through gRPC's generic stub, the way another language's gRPC would.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>

#include "google/protobuf/compiler/importer.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"

namespace {

namespace pb = google::protobuf;

class SilentErrors : public pb::compiler::MultiFileErrorCollector {
 public:
  void AddError(const std::string& file, int line, int,
                const std::string& m) override {
    ADD_FAILURE() << file << ":" << line << ": " << m;
  }
};

// Starts ferryd on a free loopback port; returns its address.
struct Ferryd {
  pid_t pid = -1;
  std::string address;
  Ferryd() {
    int out[2];
    if (pipe(out) != 0) return;
    pid = fork();
    if (pid == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      execl(FERRYD_PATH, FERRYD_PATH, "--listen", "127.0.0.1:0", "--workers",
            "1", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    FILE* stream = fdopen(out[0], "r");
    char line[256] = {0};
    if (stream && fgets(line, sizeof(line), stream)) {
      std::string text(line);
      while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
        text.pop_back();
      address = text.substr(text.rfind(' ') + 1);
    }
  }
  ~Ferryd() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      int status = 0;
      waitpid(pid, &status, 0);
    }
  }
};

grpc::Status Call(grpc::GenericStub& stub, const std::string& method,
                  const pb::Message& request, pb::Message* response) {
  std::string bytes;
  request.SerializeToString(&bytes);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer send(&slice, 1), receive;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &send, &receive,
                 [&](grpc::Status s) { done.set_value(s); });
  grpc::Status status = done.get_future().get();
  if (!status.ok()) return status;
  std::vector<grpc::Slice> slices;
  (void)receive.Dump(&slices);
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return response->ParseFromString(out)
             ? status
             : grpc::Status(grpc::StatusCode::INTERNAL, "unparsable response");
}

TEST(ProtosOnlyClient, LowersAnExampleAndAsksForCapabilities) {
  pb::compiler::DiskSourceTree tree;
  tree.MapPath("", std::string(FERRY_SOURCE_DIR) + "/proto");
  SilentErrors errors;
  pb::compiler::Importer importer(&tree, &errors);
  const pb::FileDescriptor* file = importer.Import("ferry/v1/compiler.proto");
  ASSERT_NE(file, nullptr);
  const pb::ServiceDescriptor* service = file->FindServiceByName("Compiler");
  ASSERT_NE(service, nullptr);
  const pb::MethodDescriptor* lower = service->FindMethodByName("Lower");
  const pb::MethodDescriptor* caps =
      service->FindMethodByName("GetCapabilities");
  ASSERT_TRUE(lower && caps);
  pb::DynamicMessageFactory factory(importer.pool());

  Ferryd ferryd;
  ASSERT_FALSE(ferryd.address.empty()) << "ferryd did not print its address";
  grpc::GenericStub stub(
      grpc::CreateChannel(ferryd.address, grpc::InsecureChannelCredentials()));

  std::unique_ptr<pb::Message> request(
      factory.GetPrototype(lower->input_type())->New());
  std::ifstream in(std::string(FERRY_SOURCE_DIR) +
                   "/examples/two_delegates.textproto");
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_TRUE(pb::TextFormat::ParseFromString(text.str(), request.get()));
  std::unique_ptr<pb::Message> response(
      factory.GetPrototype(lower->output_type())->New());
  grpc::Status status =
      Call(stub, "/ferry.v1.Compiler/Lower", *request, response.get());
  ASSERT_TRUE(status.ok()) << status.error_message();
  const pb::Reflection* r = response->GetReflection();
  const pb::Descriptor* d = response->GetDescriptor();
  EXPECT_TRUE(r->GetBool(*response, d->FindFieldByName("ok")));
  const pb::Message& stats =
      r->GetMessage(*response, d->FindFieldByName("stats"));
  EXPECT_EQ(stats.GetReflection()->GetInt64(
                stats, stats.GetDescriptor()->FindFieldByName("h2d_copies")),
            3);
  EXPECT_EQ(stats.GetReflection()->GetInt64(
                stats, stats.GetDescriptor()->FindFieldByName("d2h_copies")),
            1);
  EXPECT_FALSE(
      r->GetString(*response, d->FindFieldByName("compiler_version")).empty());

  std::unique_ptr<pb::Message> caps_request(
      factory.GetPrototype(caps->input_type())->New());
  std::unique_ptr<pb::Message> caps_response(
      factory.GetPrototype(caps->output_type())->New());
  status = Call(stub, "/ferry.v1.Compiler/GetCapabilities", *caps_request,
                caps_response.get());
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::string printed;
  pb::TextFormat::PrintToString(*caps_response, &printed);
  EXPECT_NE(printed.find("api_version"), std::string::npos) << printed;
}

}  // namespace
