// Standard observability end to end: a known sequence of calls on a raw
// stub (no client retries or lookups to blur the counts), then /metrics
// scraped over HTTP and parsed — grpc_server_* counted exactly, histograms
// well-formed, the queue wait, process_*, no GPU series without a GPU, the
// cache hit ratio — and the log lines' level, digest and diagnostic codes.
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/testing/synthetic_program.h"
#include "ferry/digest.h"
#include "ferry/v1/compiler.grpc.pb.h"
#include "server/log_line.pb.h"
#include "tests/service/service_test_support.h"

namespace ferry::testing {
namespace {

// A program with an error (an operator nobody knows): an OK response
// whose body carries FERRY-E0110.
v1::LowerRequest UnknownOperatorRequest() {
  return ParseRequestText(R"pb(
    program {
      methods {
        name: "forward"
        nodes {
          name: "x"
          input { kind: USER_INPUT }
          tensor { dtype: F32 sizes: 4 }
        }
        nodes {
          name: "y"
          call {
            op: "aten::no_such_op"
            args { value: "x" }
          }
          tensor { dtype: F32 sizes: 4 }
        }
        nodes {
          name: "output"
          output { values { value: "y" } }
        }
      }
    })pb");
}

// `name{grpc labels}` for a series of ferry.v1.Compiler's `method`.
std::string Grpc(const std::string& name, const std::string& method,
                 const std::string& extra = "",
                 const std::string& type = "unary") {
  return name + "{grpc_service=\"ferry.v1.Compiler\",grpc_method=\"" + method +
         "\",grpc_type=\"" + type + "\"" + extra + "}";
}

// Every series of histogram `name`: buckets in increasing `le`, counts
// cumulative, the last bucket +Inf and equal to _count, _sum >= 0.
// Returns the number of series checked.
int ExpectWellFormedHistograms(const Exposition& metrics,
                               const std::string& name) {
  EXPECT_EQ(metrics.Type(name), "histogram") << name;
  std::map<std::map<std::string, std::string>,
           std::vector<std::pair<double, double>>>
      buckets;
  for (Exposition::Sample& sample : metrics.Samples(name + "_bucket")) {
    auto le = sample.labels.find("le");
    if (le == sample.labels.end()) {
      ADD_FAILURE() << name << " bucket without le";
      continue;
    }
    double bound = le->second == "+Inf"
                       ? std::numeric_limits<double>::infinity()
                       : std::stod(le->second);
    sample.labels.erase(le);
    buckets[sample.labels].emplace_back(bound, sample.value);
  }
  std::map<std::map<std::string, std::string>, double> counts, sums;
  for (const Exposition::Sample& sample : metrics.Samples(name + "_count")) {
    counts[sample.labels] = sample.value;
  }
  for (const Exposition::Sample& sample : metrics.Samples(name + "_sum")) {
    sums[sample.labels] = sample.value;
  }
  EXPECT_EQ(buckets.size(), counts.size()) << name;
  EXPECT_EQ(sums.size(), counts.size()) << name;
  for (const auto& [labels, series] : buckets) {
    if (series.size() < 2) {
      ADD_FAILURE() << name << ": fewer than two buckets";
      continue;
    }
    for (size_t i = 1; i < series.size(); ++i) {
      EXPECT_LT(series[i - 1].first, series[i].first) << name;
      EXPECT_LE(series[i - 1].second, series[i].second) << name;
    }
    EXPECT_EQ(series.back().first, std::numeric_limits<double>::infinity());
    EXPECT_EQ(series.back().second, counts[labels]) << name;
    EXPECT_GE(sums[labels], 0) << name;
  }
  return static_cast<int>(buckets.size());
}

std::vector<LogLine> ParsedRpcLines(const LogCapture& log) {
  std::vector<LogLine> lines;
  for (const std::string& json : log.RpcLines()) {
    LogLine line;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &line).ok())
        << json;
    lines.push_back(line);
  }
  return lines;
}

class MetricsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig config = LoopbackConfig();
    config.metrics_listen = "127.0.0.1:0";
    config.blob_dir = blobs_.path();
    ServerHooks hooks;
    hooks.log_sink = log_.Sink();
    hooks.force_no_cuda = true;  // the no-GPU path, on any machine
    server_ = StartServer(config, hooks);
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Compiler::NewStub(grpc::CreateChannel(
        server_->address(), grpc::InsecureChannelCredentials()));
  }

  Exposition Scrape() {
    std::string text = ScrapeMetrics(server_->metrics_address());
    EXPECT_FALSE(text.empty());
    Exposition metrics(text);
    EXPECT_TRUE(metrics.well_formed())
        << (metrics.malformed().empty() ? "" : metrics.malformed()[0]);
    return metrics;
  }

  grpc::Status Lower(const v1::LowerRequest& request,
                     v1::LowerResponse* response) {
    grpc::ClientContext context;
    return stub_->Lower(&context, request, response);
  }

  TempDir blobs_;
  LogCapture log_;
  std::unique_ptr<FerryServer> server_;
  std::unique_ptr<v1::Compiler::Stub> stub_;
};

TEST_F(MetricsE2eTest, GrpcSeriesCountAKnownSequenceOfCallsExactly) {
  v1::LowerResponse first, second, failed;
  ASSERT_TRUE(Lower(TinyRequest(), &first).ok());   // a miss
  ASSERT_TRUE(Lower(TinyRequest(), &second).ok());  // a hit
  EXPECT_TRUE(second.cached());
  EXPECT_EQ(Scrape().Value("ferry_cache_hit_ratio"), 0.5);

  ASSERT_TRUE(Lower(UnknownOperatorRequest(), &failed).ok());  // a miss
  EXPECT_FALSE(failed.ok());
  {
    grpc::ClientContext context;
    v1::GetCapabilitiesResponse caps;
    ASSERT_TRUE(stub_->GetCapabilities(&context, {}, &caps).ok());
  }
  {
    grpc::ClientContext context;
    v1::VerifyRequest verify;
    *verify.mutable_request() = TinyRequest();
    verify.set_device(v1::VERIFY_DEVICE_SIM);
    v1::VerifyResponse verified;
    ASSERT_TRUE(stub_->Verify(&context, verify, &verified).ok());
  }
  {
    grpc::ClientContext context;
    v1::LookupRequest lookup;
    lookup.set_request_digest("not a digest");
    v1::LowerResponse found;
    EXPECT_EQ(stub_->Lookup(&context, lookup, &found).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }

  Exposition metrics = Scrape();
  const std::string ok = ",grpc_code=\"OK\"";
  for (const auto& [series, value] :
       std::vector<std::pair<std::string, double>>{
           {Grpc("grpc_server_started_total", "Lower"), 3},
           {Grpc("grpc_server_handled_total", "Lower", ok), 3},
           {Grpc("grpc_server_msg_received_total", "Lower"), 3},
           {Grpc("grpc_server_msg_sent_total", "Lower"), 3},
           {Grpc("grpc_server_handling_seconds_count", "Lower"), 3},
           {Grpc("grpc_server_started_total", "GetCapabilities"), 1},
           {Grpc("grpc_server_handled_total", "GetCapabilities", ok), 1},
           {Grpc("grpc_server_handled_total", "Verify", ok), 1},
           {Grpc("grpc_server_started_total", "Lookup"), 1},
           {Grpc("grpc_server_handled_total", "Lookup",
                 ",grpc_code=\"INVALID_ARGUMENT\""),
            1},
           {Grpc("grpc_server_msg_received_total", "Lookup"), 1},
           // Two misses reached a worker (the hit did not), and the Verify.
           {"ferry_queue_wait_seconds_count{method=\"Lower\"}", 2},
           {"ferry_queue_wait_seconds_count{method=\"Verify\"}", 1},
           {"ferry_cache_lookups_total{result=\"hit\"}", 1},
           {"ferry_cache_lookups_total{result=\"miss\"}", 2}}) {
    EXPECT_EQ(metrics.Value(series), value) << series;
  }
  // No response went back for the refused Lookup, and no other code was
  // counted.
  EXPECT_FALSE(metrics.Value(Grpc("grpc_server_msg_sent_total", "Lookup")));
  EXPECT_EQ(metrics.Samples("grpc_server_handled_total").size(), 4u);
  EXPECT_EQ(metrics.Type("grpc_server_handled_total"), "counter");
  EXPECT_DOUBLE_EQ(*metrics.Value("ferry_cache_hit_ratio"), 1.0 / 3);

  EXPECT_EQ(ExpectWellFormedHistograms(metrics, "grpc_server_handling_seconds"),
            4);
  EXPECT_EQ(ExpectWellFormedHistograms(metrics, "ferry_queue_wait_seconds"), 2);
  ExpectWellFormedHistograms(metrics, "ferry_request_duration_seconds");

  EXPECT_GT(metrics.Value("process_resident_memory_bytes").value_or(0), 0);
  EXPECT_GT(metrics.Value("process_open_fds").value_or(0), 0);
  EXPECT_TRUE(metrics.Value("process_cpu_seconds_total"));
  EXPECT_TRUE(metrics.Value("process_start_time_seconds"));
  EXPECT_TRUE(metrics.Value("process_max_fds"));
  EXPECT_GE(metrics.Value("process_virtual_memory_bytes").value_or(0),
            metrics.Value("process_resident_memory_bytes").value_or(1));
  EXPECT_FALSE(metrics.HasPrefix("ferry_gpu_"));
}

TEST_F(MetricsE2eTest, UploadBlobIsAClientStreamWithItsMessagesCounted) {
  const std::string data(1000, 'w');
  v1::UploadBlobResponse uploaded;
  grpc::ClientContext context;
  auto writer = stub_->UploadBlob(&context, &uploaded);
  v1::UploadBlobRequest chunk;
  chunk.mutable_digest()->set_hash(Sha256HexOf(data));
  chunk.mutable_digest()->set_size_bytes(static_cast<int64_t>(data.size()));
  chunk.set_data(data.substr(0, 600));
  ASSERT_TRUE(writer->Write(chunk));
  chunk.Clear();
  chunk.set_data(data.substr(600));
  ASSERT_TRUE(writer->Write(chunk));
  ASSERT_TRUE(writer->WritesDone());
  ASSERT_TRUE(writer->Finish().ok());

  Exposition metrics = Scrape();
  const std::string type = "client_stream";
  EXPECT_EQ(
      metrics.Value(Grpc("grpc_server_started_total", "UploadBlob", "", type)),
      1);
  EXPECT_EQ(metrics.Value(
                Grpc("grpc_server_msg_received_total", "UploadBlob", "", type)),
            2);
  EXPECT_EQ(
      metrics.Value(Grpc("grpc_server_msg_sent_total", "UploadBlob", "", type)),
      1);
  EXPECT_EQ(metrics.Value(Grpc("grpc_server_handled_total", "UploadBlob",
                               ",grpc_code=\"OK\"", type)),
            1);
}

TEST_F(MetricsE2eTest, LogLinesCarryLevelDigestAndTheCodesOfAFailedCompile) {
  v1::LowerResponse lowered, failed;
  ASSERT_TRUE(Lower(TinyRequest(), &lowered).ok());
  ASSERT_TRUE(Lower(UnknownOperatorRequest(), &failed).ok());
  ASSERT_FALSE(failed.ok());
  {
    grpc::ClientContext context;
    v1::FindMissingBlobsRequest request;
    request.add_blob_digests()->set_hash("short");
    v1::FindMissingBlobsResponse response;
    EXPECT_EQ(
        stub_->FindMissingBlobs(&context, request, &response).error_code(),
        grpc::StatusCode::INVALID_ARGUMENT);
  }

  std::vector<LogLine> lines = ParsedRpcLines(log_);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].level(), "info");
  EXPECT_EQ(lines[0].outcome(), "lowered");
  EXPECT_EQ(lines[0].request_digest(), lowered.request_digest());
  EXPECT_TRUE(IsSha256Hex(lines[0].request_digest()));
  EXPECT_EQ(lines[0].diagnostic_codes_size(), 0);

  EXPECT_EQ(lines[1].level(), "info");  // the call succeeded
  EXPECT_EQ(lines[1].outcome(), "compile_failed");
  EXPECT_EQ(lines[1].request_digest(), failed.request_digest());
  EXPECT_NE(lines[1].request_digest(), lines[0].request_digest());
  ASSERT_EQ(lines[1].diagnostic_codes_size(), 1);
  EXPECT_EQ(lines[1].diagnostic_codes(0), "FERRY-E0110");

  EXPECT_EQ(lines[2].method(), "FindMissingBlobs");
  EXPECT_EQ(lines[2].level(), "warning");
  EXPECT_FALSE(lines[2].has_request_digest());
}

}  // namespace
}  // namespace ferry::testing
