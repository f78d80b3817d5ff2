// LowerStream and VerifyStream: progress in pipeline order, then exactly the
// unary response; the unary calls' errors; cancellation mid-stream; a
// reader that does not read holds at most one pending update on the server.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "client/testing/synthetic_program.h"
#include "ferry/client.h"
#include "ferry/v1/compiler.grpc.pb.h"
#include "passes/pipeline.h"
#include "tests/service/service_test_support.h"

namespace ferry::testing {
namespace {

std::unique_ptr<v1::Compiler::Stub> RawStub(const std::string& address) {
  return v1::Compiler::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

// The stage names of `update.finished`.
std::vector<std::string> FinishedStages(const v1::ProgressUpdate& update) {
  std::vector<std::string> names;
  for (const v1::StageTiming& stage : update.finished())
    names.push_back(stage.stage());
  return names;
}

// Each update is a snapshot that extends the one before it.
void ExpectSnapshotsGrow(const std::vector<v1::ProgressUpdate>& updates) {
  for (size_t i = 1; i < updates.size(); ++i) {
    ASSERT_GE(updates[i].finished_size(), updates[i - 1].finished_size());
    for (int j = 0; j < updates[i - 1].finished_size(); ++j) {
      EXPECT_EQ(updates[i].finished(j).stage(),
                updates[i - 1].finished(j).stage());
    }
  }
}

// Durations differ between two runs; everything else must not.
std::string WithoutDurations(v1::LowerResponse response) {
  for (v1::PassStats& pass : *response.mutable_stats()->mutable_passes())
    pass.set_micros(0);
  return CanonicalBytes(response);
}

CallOptions Uncached(const std::string& id) {
  CallOptions call;
  call.bypass_cache = true;
  call.request_id = id;
  return call;
}

TEST(ProgressStreamTest, LowerStreamYieldsPassesInOrderThenTheUnaryResponse) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  v1::LowerRequest request = TinyRequest();

  std::vector<v1::ProgressUpdate> updates;
  absl::StatusOr<v1::LowerResponse> streamed = client->LowerStream(
      request,
      [&](const v1::ProgressUpdate& update) { updates.push_back(update); },
      Uncached("progress-1"));
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  absl::StatusOr<v1::LowerResponse> unary =
      client->Lower(request, Uncached("progress-1"));
  ASSERT_TRUE(unary.ok()) << unary.status();

  ASSERT_FALSE(updates.empty());
  EXPECT_EQ(updates.front().stage(), v1::ProgressUpdate::STAGE_QUEUED);
  ExpectSnapshotsGrow(updates);
  // The last snapshot holds every pass, in pipeline order, with the
  // durations the response's stats report.
  EXPECT_EQ(FinishedStages(updates.back()), PipelinePassNames());
  ASSERT_EQ(streamed->stats().passes_size(), updates.back().finished_size());
  for (int i = 0; i < streamed->stats().passes_size(); ++i) {
    EXPECT_EQ(streamed->stats().passes(i).micros(),
              updates.back().finished(i).micros());
  }
  EXPECT_TRUE(streamed->ok());
  EXPECT_EQ(WithoutDurations(*streamed), WithoutDurations(*unary));
}

TEST(ProgressStreamTest, VerifyStreamReportsPassesThenStepsThenTheResult) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  v1::VerifyRequest request;
  *request.mutable_request() = TinyRequest();
  request.set_device(v1::VERIFY_DEVICE_SIM);

  std::vector<v1::ProgressUpdate> updates;
  absl::StatusOr<v1::VerifyResponse> streamed = client->VerifyStream(
      request,
      [&](const v1::ProgressUpdate& update) { updates.push_back(update); },
      Uncached("progress-2"));
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  absl::StatusOr<v1::VerifyResponse> unary =
      client->Verify(request, Uncached("progress-2"));
  ASSERT_TRUE(unary.ok()) << unary.status();

  ASSERT_FALSE(updates.empty());
  ExpectSnapshotsGrow(updates);
  std::vector<std::string> expected = PipelinePassNames();
  for (const char* step : {"eager_run", "lowered_run", "compare"})
    expected.push_back(step);
  EXPECT_EQ(FinishedStages(updates.back()), expected);
  EXPECT_EQ(updates.back().finished(expected.size() - 1).method(),
            request.request().program().methods(0).name());
  EXPECT_TRUE(streamed->ok());
  EXPECT_EQ(CanonicalBytes(streamed->report()),
            CanonicalBytes(unary->report()));
  EXPECT_EQ(streamed->device(), unary->device());
  EXPECT_EQ(streamed->request_id(), unary->request_id());
}

TEST(ProgressStreamTest, ErrorsAreTheUnaryCallsStatuses) {
  ServerConfig config = LoopbackConfig();
  config.max_nodes = 50;
  ServerHooks hooks;
  hooks.force_no_cuda = true;
  auto server = StartServer(config, hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  auto ignore = [](const v1::ProgressUpdate&) {};

  v1::LowerRequest big = SyntheticChainRequest(100);
  absl::StatusOr<v1::LowerResponse> unary = client->Lower(big);
  absl::StatusOr<v1::LowerResponse> streamed = client->LowerStream(big, ignore);
  ASSERT_EQ(unary.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(streamed.status().code(), unary.status().code());
  EXPECT_EQ(streamed.status().message(), unary.status().message());
  ASSERT_TRUE(ErrorDetail<google::rpc::ErrorInfo>(streamed.status()));
  EXPECT_EQ(ErrorDetail<google::rpc::ErrorInfo>(streamed.status())->reason(),
            "TOO_MANY_NODES");

  v1::VerifyRequest on_cuda;
  *on_cuda.mutable_request() = TinyRequest();
  on_cuda.set_device(v1::VERIFY_DEVICE_CUDA);
  absl::StatusOr<v1::VerifyResponse> verify_unary = client->Verify(on_cuda);
  absl::StatusOr<v1::VerifyResponse> verify_streamed =
      client->VerifyStream(on_cuda, ignore);
  ASSERT_EQ(verify_unary.status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(verify_streamed.status().code(), verify_unary.status().code());
  EXPECT_EQ(verify_streamed.status().message(),
            verify_unary.status().message());
}

TEST(ProgressStreamTest, CancellingMidStreamStopsTheJob) {
  JobGate gate;
  LogCapture log;
  ServerHooks hooks;
  hooks.before_job = gate.Hook();
  hooks.log_sink = log.Sink();
  auto server = StartServer(LoopbackConfig(), hooks);
  ASSERT_NE(server, nullptr);
  auto stub = RawStub(server->address());

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  std::unique_ptr<grpc::ClientReader<v1::LowerProgress>> reader =
      stub->LowerStream(&context, TinyRequest(7));
  // Read until the job has started (the gate holds it there).
  v1::LowerProgress event;
  bool started = false;
  while (!started && reader->Read(&event)) {
    started = event.has_progress() &&
              event.progress().stage() == v1::ProgressUpdate::STAGE_STARTED;
  }
  ASSERT_TRUE(started);
  ASSERT_TRUE(gate.WaitForArrivals(1));
  context.TryCancel();
  // The server has seen the cancel before the job goes on.
  ASSERT_TRUE(Eventually([&] {
    return server->RenderMetrics().find("ferry_cancellations_total 1") !=
           std::string::npos;
  }));
  gate.Open();
  while (reader->Read(&event)) EXPECT_FALSE(event.has_result());
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The server stopped the job and logged the call as cancelled.
  EXPECT_TRUE(Eventually([&] {
    for (const std::string& line : log.RpcLines()) {
      if (absl::StrContains(line, "\"method\":\"LowerStream\"") &&
          absl::StrContains(line, "CANCELLED"))
        return true;
    }
    return false;
  }));
}

// A reader that reads nothing until the server has finished the call: the
// server kept at most the latest update for it, so what arrives is at most
// one message per stage event, snapshots that only grow, the last one
// complete, then the result.
TEST(ProgressStreamTest, SlowReaderGetsTheLatestUpdateAndABoundedCount) {
  LogCapture log;
  ServerHooks hooks;
  hooks.log_sink = log.Sink();
  auto server = StartServer(LoopbackConfig(), hooks);
  ASSERT_NE(server, nullptr);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64);
  auto stub = v1::Compiler::NewStub(grpc::CreateCustomChannel(
      server->address(), grpc::InsecureChannelCredentials(), args));

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  context.AddMetadata("ferry-cache", "bypass");
  std::unique_ptr<grpc::ClientReader<v1::LowerProgress>> reader =
      stub->LowerStream(&context, SyntheticChainRequest(40));
  ASSERT_TRUE(Eventually([&] {
    for (const std::string& line : log.RpcLines())
      if (absl::StrContains(line, "\"method\":\"LowerStream\"")) return true;
    return false;
  }));

  std::vector<v1::ProgressUpdate> updates;
  v1::LowerProgress event;
  bool answered = false;
  while (reader->Read(&event)) {
    ASSERT_FALSE(answered) << "a message after the result";
    if (event.has_progress()) updates.push_back(event.progress());
    answered = event.has_result();
  }
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_TRUE(answered);
  // Queued, started, and each pass begun and finished: the most a lowering
  // can produce.
  const size_t stage_events = 2 + 2 * PipelinePassNames().size();
  EXPECT_LE(updates.size(), stage_events);
  ASSERT_FALSE(updates.empty());
  ExpectSnapshotsGrow(updates);
  EXPECT_EQ(FinishedStages(updates.back()), PipelinePassNames());
}

}  // namespace
}  // namespace ferry::testing
