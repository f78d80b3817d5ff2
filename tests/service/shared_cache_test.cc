// Past one machine (issue 12), with real processes on loopback: a
// redis-server on a unix socket in a temporary directory and ferryd
// replicas on 127.0.0.1:0, each stopped by its own PID. Every load loop is
// bounded in calls and time.
//
//  - a request lowered by one replica is a hit on the other two (Lower and
//    Lookup), and the client asks before it sends;
//  - a corrupted or truncated Redis value is detected, counted and
//    recomputed;
//  - Redis killed under load (8 clients) costs no failed request;
//  - one replica killed under load costs no failed call of a client given
//    all three addresses;
//  - a program whose constants exceed the message limit verifies through
//    blobs; a missing or mismatching blob is a clear error.
#include "server/shared_cache.h"

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/testing/synthetic_program.h"
#include "ferry/digest.h"
#include "ferry/v1/compiler.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/service/service_test_support.h"

namespace ferry::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kRedisServer[] = "/usr/bin/redis-server";
constexpr char kRedisCli[] = "/usr/bin/redis-cli";

// redis-server on a unix socket, no persistence.
class RedisServer {
 public:
  explicit RedisServer(const TempDir& dir)
      : socket_(dir.File("redis.sock")),
        process_({kRedisServer, "--port", "0", "--unixsocket", socket_,
                  "--save", "", "--appendonly", "no", "--dir", dir.path()},
                 dir.File("redis-stderr")) {
    ready_ = Eventually([&] { return Cli({"PING"}) == "PONG"; }, seconds(10));
  }
  bool ready() const { return ready_; }
  std::string address() const { return "unix:" + socket_; }
  // One redis-cli command; its output without the trailing newline.
  std::string Cli(std::vector<std::string> args) const {
    std::vector<std::string> command = {kRedisCli, "-s", socket_};
    command.insert(command.end(), args.begin(), args.end());
    Process cli(command, socket_ + ".cli-stderr");
    std::string out = cli.ReadAll();
    cli.WaitForExit(seconds(10));
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }
  void Kill() { process_.Signal(SIGKILL); }
  // Frozen: connections stay open and nothing answers (a slow Redis).
  void Freeze() { process_.Signal(SIGSTOP); }
  void Thaw() { process_.Signal(SIGCONT); }

 private:
  std::string socket_;
  Process process_;
  bool ready_ = false;
};

// A ferryd process serving gRPC and /metrics.
class Replica {
 public:
  Replica(const TempDir& dir, const std::string& name,
          std::vector<std::string> flags)
      : ferryd_(FERRYD_PATH, WithDefaults(std::move(flags)),
                dir.File(name + "-stderr"), FerrydProcess::Metrics::kOn) {}
  // "" when it did not start.
  std::string address() const {
    return ferryd_.listening() ? ferryd_.address() : "";
  }
  // The value of one series, labels in any order (0 when absent, -1 when
  // the scrape failed).
  int64_t Metric(const std::string& series) const {
    std::string text = ScrapeMetrics(ferryd_.metrics_address());
    if (text.empty()) return -1;
    return static_cast<int64_t>(Exposition(text).Value(series).value_or(0));
  }
  void Kill() { ferryd_.process().Signal(SIGKILL); }

 private:
  static std::vector<std::string> WithDefaults(std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"--workers=2", "--drain-grace=1s"});
    return flags;
  }
  FerrydProcess ferryd_;
};

std::unique_ptr<Client> Plain(const std::string& target,
                              std::function<void(ClientOptions&)> more = {}) {
  return Connect(target, [&](ClientOptions& options) {
    options.lookup_first = false;
    if (more) more(options);
  });
}

class SharedCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_ = std::make_unique<RedisServer>(dir_);
    ASSERT_TRUE(redis_->ready()) << ReadFile(dir_.File("redis-stderr"));
    for (int i = 0; i < 3; ++i) {
      replicas_.push_back(std::make_unique<Replica>(
          dir_, absl::StrCat("ferryd", i),
          std::vector<std::string>{
              "--cache-redis=" + redis_->address(),
              absl::StrCat("--cache-redis-timeout=", RedisTimeout())}));
      ASSERT_FALSE(replicas_.back()->address().empty());
    }
  }

  // Each Redis command's limit: short, so that a Redis that stops answering
  // is given up on quickly.
  virtual std::string RedisTimeout() const { return "100ms"; }

  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
  std::vector<std::unique_ptr<Replica>> replicas_;
};

// The cases that expect every Redis command to be answered: a limit that a
// loaded machine (the suite runs two tests at a time on two cores) does not
// reach, so that a slow answer is not taken for a Redis gone down.
class SharedCacheHitTest : public SharedCacheTest {
 protected:
  std::string RedisTimeout() const override { return "5s"; }
};

TEST_F(SharedCacheHitTest, LoweredByOneReplicaIsAHitOnTheOtherTwo) {
  const v1::LowerRequest request = SyntheticChainRequest(200, 7);
  std::unique_ptr<Client> first = Plain(replicas_[0]->address());
  absl::StatusOr<v1::LowerResponse> computed = first->Lower(request);
  ASSERT_TRUE(computed.ok()) << computed.status();
  ASSERT_TRUE(computed->ok());
  EXPECT_FALSE(computed->cached());
  ASSERT_TRUE(Eventually([&] {
    return replicas_[0]->Metric(
               "ferry_shared_cache_total{result=\"stored\"}") == 1;
  }));

  for (int i = 1; i < 3; ++i) {
    std::unique_ptr<Client> other = Plain(replicas_[i]->address());
    absl::StatusOr<v1::LowerResponse> hit = other->Lower(request);
    ASSERT_TRUE(hit.ok()) << hit.status();
    EXPECT_TRUE(hit->cached()) << "replica " << i;
    EXPECT_EQ(CanonicalBytes(hit->program()),
              CanonicalBytes(computed->program()));
    EXPECT_EQ(hit->request_digest(), computed->request_digest());
    EXPECT_EQ(replicas_[i]->Metric("ferry_shared_cache_total{result=\"hit\"}"),
              1);
    EXPECT_EQ(replicas_[i]->Metric("ferry_shared_cache_up"), 1);
  }

  // Lookup by the digest the client computes: no program sent.
  std::unique_ptr<Client> asker = Plain(replicas_[2]->address());
  absl::StatusOr<std::string> digest = asker->RequestDigest(request);
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(*digest, computed->request_digest());
  absl::StatusOr<v1::LowerResponse> looked_up = asker->Lookup(*digest);
  ASSERT_TRUE(looked_up.ok()) << looked_up.status();
  EXPECT_TRUE(looked_up->cached());
  EXPECT_EQ(CanonicalBytes(looked_up->program()),
            CanonicalBytes(computed->program()));
  absl::StatusOr<v1::LowerResponse> unknown =
      asker->Lookup(std::string(64, 'a'));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(asker->Lookup("not-a-digest").status().code(),
            absl::StatusCode::kInvalidArgument);

  // The default client asks first: a large request lowered elsewhere is
  // answered without being sent.
  const v1::LowerRequest large = SyntheticChainRequest(3000, 8);
  ASSERT_GE(static_cast<int64_t>(large.ByteSizeLong()), 64 << 10);
  ASSERT_TRUE(Plain(replicas_[0]->address())->Lower(large).ok());
  std::unique_ptr<Client> asking = Connect(replicas_[1]->address());
  absl::StatusOr<v1::LowerResponse> answered = asking->Lower(large);
  ASSERT_TRUE(answered.ok()) << answered.status();
  EXPECT_TRUE(answered->cached());
  EXPECT_EQ(asking->lookup_hits(), 1);
  EXPECT_EQ(replicas_[1]->Metric(
                "ferry_requests_total{method=\"Lower\",code=\"OK\"}"),
            1)  // the 200-node request above; the large one was not sent
      << "the large request was sent although the replica could answer it";
}

TEST_F(SharedCacheHitTest, CorruptedAndTruncatedValuesAreRecomputed) {
  std::unique_ptr<Client> first = Plain(replicas_[0]->address());
  const v1::LowerRequest request = SyntheticChainRequest(100, 3);
  absl::StatusOr<v1::LowerResponse> computed = first->Lower(request);
  ASSERT_TRUE(computed.ok() && computed->ok());
  const std::string key = SharedResultCache::KeyOf(computed->request_digest());
  ASSERT_TRUE(Eventually([&] { return redis_->Cli({"EXISTS", key}) == "1"; }));

  // One byte of the payload changed: the hash no longer matches.
  std::string stored = redis_->Cli({"STRLEN", key});
  int64_t length = 0;
  ASSERT_TRUE(absl::SimpleAtoi(stored, &length)) << stored;
  ASSERT_EQ(redis_->Cli({"SETRANGE", key, absl::StrCat(length - 10), "X"}),
            absl::StrCat(length));
  std::unique_ptr<Client> second = Plain(replicas_[1]->address());
  absl::StatusOr<v1::LowerResponse> recomputed = second->Lower(request);
  ASSERT_TRUE(recomputed.ok()) << recomputed.status();
  EXPECT_FALSE(recomputed->cached());
  EXPECT_EQ(CanonicalBytes(recomputed->program()),
            CanonicalBytes(computed->program()));
  EXPECT_EQ(
      replicas_[1]->Metric("ferry_shared_cache_total{result=\"corrupt\"}"), 1);

  // Truncated to its header: a miss, counted, recomputed.
  ASSERT_EQ(redis_->Cli({"SET", key, "FRY1abc"}), "OK");
  absl::StatusOr<v1::LowerResponse> third =
      Plain(replicas_[2]->address())->Lower(request);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_FALSE(third->cached());
  EXPECT_EQ(CanonicalBytes(third->program()),
            CanonicalBytes(computed->program()));
  EXPECT_EQ(
      replicas_[2]->Metric("ferry_shared_cache_total{result=\"corrupt\"}"), 1);
  // ... and the recomputed result replaced it (its pass timings differ, so
  // not byte for byte): a fresh replica hits it.
  ASSERT_TRUE(Eventually([&] {
    return redis_->Cli({"GETRANGE", key, "0", "3"}) == "FRY1" &&
           redis_->Cli({"STRLEN", key}) != "7";
  }));
  Replica fresh(dir_, "ferryd-fresh", {"--cache-redis=" + redis_->address()});
  absl::StatusOr<v1::LowerResponse> hit =
      Plain(fresh.address())->Lower(request);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_TRUE(hit->cached());
  EXPECT_EQ(CanonicalBytes(hit->program()),
            CanonicalBytes(computed->program()));
}

// Each of `clients` threads makes up to `calls` Lower calls (distinct
// programs, so they compute and write to Redis) or stops after `budget`;
// `midway` runs once after `trigger` calls in all have finished. The
// failures' statuses.
std::vector<std::string> RunLoad(Client& client, int clients, int calls,
                                 int trigger,
                                 const std::function<void()>& midway,
                                 int variant_base, bool bypass = false) {
  std::atomic<int> done{0};
  std::atomic<bool> triggered{false};
  std::mutex mutex;
  std::vector<std::string> failures;
  const auto stop = std::chrono::steady_clock::now() + seconds(60);
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < calls && std::chrono::steady_clock::now() < stop;
           ++i) {
        CallOptions call;
        call.bypass_cache = bypass;
        absl::StatusOr<v1::LowerResponse> lowered = client.Lower(
            SyntheticChainRequest(300, variant_base + t * 1000 + i), call);
        if (!lowered.ok() || !lowered->ok()) {
          std::lock_guard<std::mutex> lock(mutex);
          failures.push_back(lowered.ok() ? "did not lower"
                                          : lowered.status().ToString());
        }
        if (++done >= trigger && !triggered.exchange(true)) midway();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_TRUE(triggered.load()) << "the load finished before the trigger";
  return failures;
}

TEST_F(SharedCacheTest, RedisKilledUnderLoadCostsNoRequest) {
  std::unique_ptr<Client> client = Plain(replicas_[0]->address());
  std::vector<std::string> failures = RunLoad(
      *client, 8, 12, 30, [&] { redis_->Kill(); }, 100);
  EXPECT_TRUE(failures.empty())
      << failures.size() << " failed, first: " << failures.front();
  EXPECT_EQ(replicas_[0]->Metric("ferry_shared_cache_up"), 0);
  EXPECT_GT(
      replicas_[0]->Metric("ferry_shared_cache_total{result=\"unavailable\"}") +
          replicas_[0]->Metric(
              "ferry_shared_cache_total{result=\"store_failed\"}"),
      0);
  // The log says so, once.
  std::string log = ReadFile(dir_.File("ferryd0-stderr"));
  EXPECT_TRUE(absl::StrContains(log, "\"event\":\"redis\"")) << log;
  EXPECT_TRUE(absl::StrContains(log, "\"state\":\"down\""));
}

// A Redis that stops answering (connections open, nothing read) is the slow
// case: each command gives up at --cache-redis-timeout, the store goes
// down, and requests are served without it.
TEST_F(SharedCacheTest, RedisThatStopsAnsweringCostsNoRequest) {
  std::unique_ptr<Client> client = Plain(replicas_[0]->address());
  std::vector<std::string> failures = RunLoad(
      *client, 8, 8, 16, [&] { redis_->Freeze(); }, 300);
  redis_->Thaw();
  EXPECT_TRUE(failures.empty())
      << failures.size() << " failed, first: " << failures.front();
  EXPECT_GT(
      replicas_[0]->Metric("ferry_shared_cache_total{result=\"unavailable\"}") +
          replicas_[0]->Metric(
              "ferry_shared_cache_total{result=\"store_failed\"}"),
      0);
  // Once it answers again, the tier comes back (after the backoff).
  int variant = 9000;
  EXPECT_TRUE(Eventually([&] {
    // A new program each time: a hit in process would not ask Redis.
    (void)client->Lower(SyntheticChainRequest(50, ++variant));
    return replicas_[0]->Metric("ferry_shared_cache_up") == 1;
  }));
}

TEST_F(SharedCacheTest, ReplicaKilledUnderLoadCostsNoIdempotentCall) {
  std::string all =
      absl::StrCat(replicas_[0]->address(), ",", replicas_[1]->address(), ",",
                   replicas_[2]->address());
  std::unique_ptr<Client> client = Plain(all, [](ClientOptions& options) {
    options.retry.max_attempts = 5;  // gRPC's limit
    options.retry.initial_backoff = milliseconds(20);
    options.retry.max_backoff = milliseconds(200);
  });
  std::vector<std::string> failures = RunLoad(
      *client, 8, 12, 30, [&] { replicas_[1]->Kill(); }, 500, /*bypass=*/true);
  EXPECT_TRUE(failures.empty())
      << failures.size() << " failed, first: " << failures.front();
  // round_robin spread the calls: the survivors both served.
  EXPECT_GT(replicas_[0]->Metric(
                "ferry_requests_total{method=\"Lower\",code=\"OK\"}"),
            0);
  EXPECT_GT(replicas_[2]->Metric(
                "ferry_requests_total{method=\"Lower\",code=\"OK\"}"),
            0);
}

// A program x @ w with a constant w of k x n f32 (transposed when asked, so
// that lowering must re-lay it out).
v1::LowerRequest MatmulWithWeights(int k, int n, bool transposed) {
  v1::LowerRequest request;
  v1::Method* method = request.mutable_program()->add_methods();
  method->set_name("forward");
  v1::Node* x = method->add_nodes();
  x->set_name("x");
  x->mutable_input()->set_kind(v1::USER_INPUT);
  x->mutable_tensor()->set_dtype(v1::F32);
  x->mutable_tensor()->add_sizes(4);
  x->mutable_tensor()->add_sizes(k);
  v1::TensorSpec spec;
  spec.set_dtype(v1::F32);
  spec.add_sizes(k);
  spec.add_sizes(n);
  if (transposed) {
    spec.add_strides(1);
    spec.add_strides(k);
  }
  v1::Node* w = method->add_nodes();
  w->set_name("w");
  w->mutable_input()->set_kind(v1::PARAMETER);
  w->mutable_input()->set_target("w");
  *w->mutable_tensor() = spec;
  w->set_delegation_tag("d0");
  v1::Node* y = method->add_nodes();
  y->set_name("y");
  y->mutable_call()->set_op("aten::mm");
  y->mutable_call()->add_args()->set_value("x");
  y->mutable_call()->add_args()->set_value("w");
  y->mutable_tensor()->set_dtype(v1::F32);
  y->mutable_tensor()->add_sizes(4);
  y->mutable_tensor()->add_sizes(n);
  y->set_delegation_tag("d0");
  v1::Node* output = method->add_nodes();
  output->set_name("output");
  output->mutable_output()->add_values()->set_value("y");
  v1::Constant* constant = request.mutable_program()->add_constants();
  constant->set_name("w");
  *constant->mutable_spec() = spec;
  std::string data(static_cast<size_t>(k) * n * 4, '\0');
  for (size_t i = 0; i < data.size() / 4; ++i) {
    float value = static_cast<float>(i % 97) / 97.0f - 0.5f;
    std::memcpy(&data[i * 4], &value, 4);
  }
  constant->set_data(std::move(data));
  (*request.mutable_options()
        ->mutable_partitioner()
        ->mutable_tag_targets())["d0"] = "cuda:0";
  return request;
}

class BlobTest : public ::testing::TestWithParam<bool> {
 protected:
  // Replicas with a 1 MiB message limit; blobs in Redis (param true) or in
  // a directory.
  void SetUp() override {
    std::vector<std::string> flags = {"--max-message-bytes=1MiB"};
    if (GetParam()) {
      redis_ = std::make_unique<RedisServer>(dir_);
      ASSERT_TRUE(redis_->ready());
      flags.push_back("--cache-redis=" + redis_->address());
    } else {
      flags.push_back("--blob-dir=" + dir_.File("blobs"));
    }
    replica_ = std::make_unique<Replica>(dir_, "ferryd", flags);
    ASSERT_FALSE(replica_->address().empty())
        << ReadFile(dir_.File("ferryd-stderr"));
  }
  std::unique_ptr<Client> Blobs(int64_t threshold) {
    return Connect(replica_->address(), [&](ClientOptions& options) {
      options.blob_threshold_bytes = threshold;
      options.upload_chunk_bytes = 256 << 10;
    });
  }

  TempDir dir_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<Replica> replica_;
};

TEST_P(BlobTest, ProgramOverTheMessageLimitVerifiesThroughBlobs) {
  v1::VerifyRequest verify;
  *verify.mutable_request() = MatmulWithWeights(1024, 512, false);  // 2 MiB
  verify.set_device(v1::VERIFY_DEVICE_SIM);
  ASSERT_GT(verify.ByteSizeLong(), size_t{1} << 20);

  absl::StatusOr<v1::VerifyResponse> inline_sent = Blobs(0)->Verify(verify);
  EXPECT_EQ(inline_sent.status().code(), absl::StatusCode::kResourceExhausted)
      << "the program must be over the message limit inline";

  std::unique_ptr<Client> client = Blobs(64 << 10);
  absl::StatusOr<v1::GetCapabilitiesResponse> caps = client->GetCapabilities();
  ASSERT_TRUE(caps.ok());
  EXPECT_EQ(caps->blob_store(), GetParam() ? "redis" : "disk");
  absl::StatusOr<v1::VerifyResponse> verified = client->Verify(verify);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_TRUE(verified->lowered());
  EXPECT_TRUE(verified->ok()) << verified->report().summary();
  EXPECT_EQ(replica_->Metric("ferry_blob_uploads_total"), 1);

  // Once uploaded, a second Verify uploads nothing.
  ASSERT_TRUE(client->Verify(verify).ok());
  EXPECT_EQ(replica_->Metric("ferry_blob_uploads_total"), 1);
}

TEST_P(BlobTest, LowerFetchesOnlyTheBlobsAPassNeeds) {
  std::unique_ptr<Client> client = Blobs(64 << 10);
  // Contiguous weights: lowered by digest alone, nothing uploaded, and the
  // program comes back with its bytes.
  v1::LowerRequest plain = MatmulWithWeights(256, 256, false);
  absl::StatusOr<v1::LowerResponse> lowered = client->Lower(plain);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_TRUE(lowered->ok());
  EXPECT_EQ(replica_->Metric("ferry_blob_uploads_total"), 0);
  ASSERT_EQ(lowered->program().constants_size(), 1);
  EXPECT_EQ(lowered->program().constants(0).data(),
            plain.program().constants(0).data());
  EXPECT_FALSE(lowered->program().constants(0).has_data_digest());

  // Transposed weights must be re-laid out: the server asks for that blob,
  // the client uploads it, and the result matches lowering inline.
  v1::LowerRequest transposed = MatmulWithWeights(256, 256, true);
  absl::StatusOr<v1::LowerResponse> relaid = client->Lower(transposed);
  ASSERT_TRUE(relaid.ok()) << relaid.status();
  ASSERT_TRUE(relaid->ok());
  EXPECT_EQ(replica_->Metric("ferry_blob_uploads_total"), 1);
  absl::StatusOr<v1::LowerResponse> inline_lowered =
      Blobs(0)->Lower(transposed);
  ASSERT_TRUE(inline_lowered.ok());
  EXPECT_EQ(CanonicalBytes(relaid->program()),
            CanonicalBytes(inline_lowered->program()));
}

TEST_P(BlobTest, MissingAndMismatchingBlobsAreClearErrors) {
  std::unique_ptr<Client> client = Blobs(0);
  v1::VerifyRequest verify;
  *verify.mutable_request() = MatmulWithWeights(64, 64, false);
  verify.set_device(v1::VERIFY_DEVICE_SIM);
  v1::Constant* w =
      verify.mutable_request()->mutable_program()->mutable_constants(0);
  v1::Digest digest = BlobDigestOf(w->data());
  w->clear_data();
  *w->mutable_data_digest() = digest;
  absl::StatusOr<v1::VerifyResponse> missing = client->Verify(verify);
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition)
      << missing.status();
  std::optional<google::rpc::PreconditionFailure> failure =
      ErrorDetail<google::rpc::PreconditionFailure>(missing.status());
  ASSERT_TRUE(failure.has_value());
  ASSERT_EQ(failure->violations_size(), 1);
  EXPECT_EQ(failure->violations(0).type(), "MISSING");
  EXPECT_EQ(failure->violations(0).subject(),
            absl::StrCat("blobs/", digest.hash(), "/", digest.size_bytes()));

  // A reference larger than any blob the server takes: refused before
  // anything is charged or read.
  v1::VerifyRequest huge = verify;
  huge.mutable_request()
      ->mutable_program()
      ->mutable_constants(0)
      ->mutable_data_digest()
      ->set_size_bytes(int64_t{1} << 62);
  absl::Status over = client->Verify(huge).status();
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted) << over;
  EXPECT_TRUE(ErrorDetail<google::rpc::QuotaFailure>(over).has_value());

  absl::StatusOr<std::vector<v1::Digest>> absent =
      client->FindMissingBlobs({digest});
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_EQ(absent->size(), 1u);

  // Bytes that do not hash to the digest they are sent under.
  auto channel = grpc::CreateChannel(replica_->address(),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::Compiler::NewStub(channel);
  grpc::ClientContext context;
  v1::UploadBlobResponse response;
  auto writer = stub->UploadBlob(&context, &response);
  v1::UploadBlobRequest chunk;
  *chunk.mutable_digest() = digest;
  chunk.set_data(std::string(static_cast<size_t>(digest.size_bytes()), 'x'));
  writer->Write(chunk);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "do not hash"))
      << status.error_message();
  absent = client->FindMissingBlobs({digest});
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(absent->size(), 1u) << "a mismatching upload stored something";

  // Uploaded properly, the same request verifies.
  std::string bytes =
      MatmulWithWeights(64, 64, false).program().constants(0).data();
  absl::StatusOr<v1::Digest> uploaded = client->UploadBlob(bytes);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  EXPECT_EQ(uploaded->hash(), digest.hash());
  absl::StatusOr<v1::VerifyResponse> verified = client->Verify(verify);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_TRUE(verified->ok()) << verified->report().summary();
}

// Streams that never send a byte cannot pile up: beyond 64 open ones the
// next is refused at once, and closing them frees the slots.
TEST_P(BlobTest, IdleUploadStreamsAreBounded) {
  auto channel = grpc::CreateChannel(replica_->address(),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::Compiler::NewStub(channel);
  struct Open {
    grpc::ClientContext context;
    v1::UploadBlobResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::UploadBlobRequest>> writer;
  };
  std::vector<std::unique_ptr<Open>> idle;
  for (int i = 0; i < 64; ++i) {
    idle.push_back(std::make_unique<Open>());
    idle.back()->writer =
        stub->UploadBlob(&idle.back()->context, &idle.back()->response);
  }
  // The server holds all 64 before the 65th is sent, however slow it runs.
  ASSERT_TRUE(Eventually(
      [&] { return replica_->Metric("ferry_blob_uploads_open") == 64; },
      seconds(60)))
      << "the server holds " << replica_->Metric("ferry_blob_uploads_open")
      << " open uploads, not 64";
  Open extra;
  extra.writer = stub->UploadBlob(&extra.context, &extra.response);
  extra.writer->WritesDone();
  grpc::Status refused = extra.writer->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << "a 65th idle upload stream was accepted: " << refused.error_code()
      << " " << refused.error_message();
  for (auto& open : idle) {
    open->writer->WritesDone();
    EXPECT_EQ(open->writer->Finish().error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);  // carried no message
  }
  absl::StatusOr<v1::Digest> uploaded = Blobs(0)->UploadBlob("after");
  EXPECT_TRUE(uploaded.ok()) << uploaded.status();
}

INSTANTIATE_TEST_SUITE_P(Stores, BlobTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Redis" : "Disk";
                         });

// --max-connection-age: the server closes aged connections (GOAWAY), the
// client reconnects (so it would reach pods added since), and no call fails.
TEST(Rebalancing, AgedConnectionsAreReplacedWithoutFailedCalls) {
  TempDir dir;
  Replica replica(
      dir, "ferryd",
      {"--max-connection-age=500ms", "--max-connection-age-grace=2s"});
  ASSERT_FALSE(replica.address().empty());
  std::unique_ptr<Client> client = Plain(replica.address());
  int failed = 0;
  for (int i = 0; i < 25; ++i) {  // ~2.5 s, five connection ages
    CallOptions call;
    call.bypass_cache = true;
    if (!client->Lower(TinyRequest(i), call).ok()) ++failed;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(failed, 0);
  std::set<std::string> peers;
  for (absl::string_view line :
       absl::StrSplit(ReadFile(dir.File("ferryd-stderr")), '\n')) {
    size_t at = line.find("\"peer\":\"");
    if (at == absl::string_view::npos) continue;
    absl::string_view peer = line.substr(at + 8);
    peers.insert(std::string(peer.substr(0, peer.find('"'))));
  }
  EXPECT_GE(peers.size(), 2u) << "the client kept one connection throughout";
}

TEST(SharedCacheConfig, BadRedisAddressIsRefusedAtStart) {
  TempDir dir;
  Process ferryd({FERRYD_PATH, "--listen=127.0.0.1:0", "--cache-redis=nowhere"},
                 dir.File("stderr"));
  EXPECT_EQ(ferryd.WaitForExit(seconds(10)), 2);
  EXPECT_TRUE(absl::StrContains(ReadFile(dir.File("stderr")),
                                "is not HOST:PORT or unix:PATH"));
}

TEST(SharedCacheConfig, RedisDownAtStartIsServedWithout) {
  TempDir dir;
  Replica replica(dir, "ferryd",
                  {"--cache-redis=unix:" + dir.File("nobody.sock")});
  ASSERT_FALSE(replica.address().empty());
  absl::StatusOr<v1::LowerResponse> lowered =
      Plain(replica.address())->Lower(TinyRequest(1));
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_TRUE(lowered->ok());
  EXPECT_EQ(replica.Metric("ferry_shared_cache_up"), 0);
}

}  // namespace
}  // namespace ferry::testing
