// The soak test of issue 8: the real ferryd binary under a memory budget,
// eight clients sending a bounded mix of valid, huge, recursive and
// malformed requests for a bounded time (FERRY_SOAK_SECONDS, default 120,
// at most 600). The server must never die, must answer every call with a
// status (valid requests OK, or a retry-later code under load), must still
// serve valid work at the end, and its peak RSS (VmHWM) must stay under the
// configured --max-memory-bytes. It then drains on SIGTERM and exits 0.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/testing/synthetic_program.h"
#include "ferry/client.h"
#include "tests/service/service_test_support.h"

namespace ferry::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kBudgetBytes = int64_t{1} << 30;  // --max-memory-bytes
constexpr int kClients = 8;

// A 4-byte constant declared f32[100000,100000] with strides [0,0]: 40 GB
// once made contiguous.
v1::LowerRequest BroadcastConstantRequest() {
  return ParseRequestText(R"pb(
    program {
      methods {
        name: "forward"
        nodes {
          name: "w"
          input { kind: PARAMETER target: "w" }
          tensor {
            dtype: F32
            sizes: 100000
            sizes: 100000
            strides: 0
            strides: 0
          }
        }
        nodes {
          name: "r"
          call {
            op: "aten::relu"
            args { value: "w" }
          }
          tensor { dtype: F32 sizes: 100000 sizes: 100000 }
        }
        nodes {
          name: "output"
          output { values { value: "r" } }
        }
      }
      constants {
        name: "w"
        spec { dtype: F32 sizes: 100000 sizes: 100000 strides: 0 strides: 0 }
        data: "\000\000\200?"
      }
    })pb");
}

// An f32[20000,20000] input (1.6 GB to generate), or one with a storage
// offset of 2^32 elements.
v1::LowerRequest HugeInputRequest(bool far_offset) {
  std::string spec = far_offset
                         ? "dtype: F32 sizes: 4 storage_offset: 4294967296"
                         : "dtype: F32 sizes: 20000 sizes: 20000";
  return ParseRequestText(absl::StrCat(R"pb(
                                         program { methods {
                                           name: "forward"
                                           nodes { name: "x"
                                                   input { kind: USER_INPUT }
                                                   tensor {)pb",
                                       spec, R"pb(}
                                                  }
        nodes { name: "output" output { values { value: "x" } } }
      }
    })pb"));
}

// A lowered module whose graph delegates to itself.
v1::LowerRequest SelfCallingModuleRequest() {
  return ParseRequestText(R"pb(
    program {
      methods {
        name: "forward"
        nodes {
          name: "a"
          input { kind: USER_INPUT }
          tensor { dtype: F32 sizes: 4 }
        }
        nodes {
          name: "d"
          delegate {
            module: "loop"
            args { value: "a" }
          }
          tuple { elements { dtype: F32 sizes: 4 } }
        }
        nodes {
          name: "t"
          getitem { source: "d" index: 0 }
          tensor { dtype: F32 sizes: 4 }
        }
        nodes {
          name: "output"
          output { values { value: "t" } }
        }
      }
      modules {
        id: "loop"
        backend: "FerryCudaBackend"
        graph {
          name: "loop"
          nodes {
            name: "x"
            input { kind: USER_INPUT }
            tensor { dtype: F32 sizes: 4 }
          }
          nodes {
            name: "again"
            delegate {
              module: "loop"
              args { value: "x" }
            }
            tuple { elements { dtype: F32 sizes: 4 } }
          }
          nodes {
            name: "y"
            getitem { source: "again" index: 0 }
            tensor { dtype: F32 sizes: 4 }
          }
          nodes {
            name: "output"
            output { values { value: "y" } }
          }
        }
        input_layouts { dtype: F32 sizes: 4 }
        returns_tuple: true
      }
    })pb");
}

v1::VerifyRequest AsVerify(const v1::LowerRequest& request) {
  v1::VerifyRequest verify;
  *verify.mutable_request() = request;
  verify.set_device(v1::VERIFY_DEVICE_SIM);
  return verify;
}

// Peak resident set (VmHWM) of a process, in bytes; -1 when unreadable.
int64_t PeakRssBytes(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::atoll(line.c_str() + 6) * 1024;
    }
  }
  return -1;
}

int SoakSeconds() {
  const char* value = std::getenv("FERRY_SOAK_SECONDS");
  int seconds = value ? std::atoi(value) : 120;
  return std::clamp(seconds, 1, 600);
}

// Codes a client may see for a valid request on a loaded server: it should
// come back later. Anything else is a failure.
bool IsRetryLater(grpc::StatusCode code) {
  return code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
         code == grpc::StatusCode::UNAVAILABLE ||
         code == grpc::StatusCode::DEADLINE_EXCEEDED;
}

struct Tally {
  std::mutex mutex;
  std::map<std::string, std::map<int, int>> codes;  // kind -> code -> count
  std::vector<std::string> failures;

  void Count(const std::string& kind, int code) {
    std::lock_guard<std::mutex> lock(mutex);
    ++codes[kind][code];
  }
  void Fail(std::string why) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failures.size() < 20) failures.push_back(std::move(why));
  }
};

// One raw Lower call of random bytes through a generic stub. Most do not
// parse; those that happen to parse as a LowerRequest hold no usable
// program, so their response must say it did not lower (`lowered`).
grpc::Status SendGarbage(grpc::GenericStub& stub, std::mt19937& random,
                         bool* lowered) {
  std::string bytes(1 + random() % 512, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  grpc::StubOptions options;
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  grpc::Status result;
  stub.UnaryCall(&context, "/ferry.v1.Compiler/Lower", options, &request,
                 &response, [&](grpc::Status status) {
                   std::lock_guard<std::mutex> lock(mutex);
                   result = std::move(status);
                   done = true;
                   done_cv.notify_one();
                 });
  std::unique_lock<std::mutex> lock(mutex);
  done_cv.wait(lock, [&] { return done; });
  *lowered = false;
  if (result.ok()) {
    std::vector<grpc::Slice> slices;
    v1::LowerResponse parsed;
    std::string body;
    if (response.Dump(&slices).ok()) {
      for (const grpc::Slice& piece : slices) {
        body.append(reinterpret_cast<const char*>(piece.begin()), piece.size());
      }
    }
    *lowered = !parsed.ParseFromString(body) || parsed.ok();
  }
  return result;
}

TEST(SoakTest, MixedHostileLoadNeverTakesTheServerDown) {
  TempDir dir;
  FerrydProcess ferryd(
      FERRYD_PATH,
      {"--workers", "2", "--queue-depth", "16", "--max-memory-bytes",
       std::to_string(kBudgetBytes), "--max-verify-bytes",
       std::to_string(kBudgetBytes / 4), "--drain-grace", "5s"},
      dir.File("stderr"));
  ASSERT_TRUE(ferryd.listening()) << ferryd.address() << ferryd.log();
  const std::string address = ferryd.address();
  int pid = ferryd.pid();

  const v1::LowerRequest broadcast = BroadcastConstantRequest();
  const v1::VerifyRequest huge_input = AsVerify(HugeInputRequest(false));
  const v1::VerifyRequest far_offset = AsVerify(HugeInputRequest(true));
  const v1::LowerRequest self_calling = SelfCallingModuleRequest();
  const v1::VerifyRequest self_calling_verify = AsVerify(self_calling);

  const Clock::time_point stop =
      Clock::now() + std::chrono::seconds(SoakSeconds());
  constexpr int kMaxCallsPerClient = 20000;  // a bound besides the clock
  Tally tally;
  std::atomic<int64_t> calls{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto client = Connect(address, [](ClientOptions& options) {
        options.retry.max_attempts = 1;
        options.default_deadline = std::chrono::seconds(15);
      });
      auto channel =
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
      grpc::GenericStub generic(channel);
      std::mt19937 random(1234 + c);
      for (int i = 0; i < kMaxCallsPerClient && Clock::now() < stop; ++i) {
        calls.fetch_add(1);
        int pick = random() % 10;
        std::string kind;
        absl::Status status;
        bool must_succeed = false;
        switch (pick) {
          case 0:
          case 1:
            kind = "valid-lower";
            must_succeed = true;
            status = client->Lower(SyntheticChainRequest(200, random() % 50))
                         .status();
            break;
          case 2:
            kind = "valid-verify";
            must_succeed = true;
            status =
                client->Verify(AsVerify(TinyRequest(random() % 50))).status();
            break;
          case 3:
            kind = "large-lower";
            must_succeed = true;
            status = client->Lower(SyntheticChainRequest(20000, random() % 4))
                         .status();
            break;
          case 4:
            kind = "broadcast-constant";
            status = client->Lower(broadcast).status();
            break;
          case 5:
            kind = "huge-input";
            status =
                client->Verify(random() % 2 ? huge_input : far_offset).status();
            break;
          case 6: {
            // Refused by validation: an OK response that did not lower.
            kind = "self-calling";
            bool lowered = false;
            if (random() % 2) {
              auto response = client->Lower(self_calling);
              status = response.status();
              lowered = response.ok() && response->ok();
            } else {
              auto response = client->Verify(self_calling_verify);
              status = response.status();
              lowered = response.ok() && response->lowered();
            }
            if (lowered) tally.Fail("self-calling module lowered");
            break;
          }
          default: {
            kind = "garbage";
            bool lowered = false;
            grpc::Status raw = SendGarbage(generic, random, &lowered);
            tally.Count(kind, raw.error_code());
            if (raw.ok() && lowered) {
              tally.Fail("garbage bytes lowered");
            } else if (!raw.ok() &&
                       raw.error_code() != grpc::StatusCode::INVALID_ARGUMENT &&
                       !IsRetryLater(raw.error_code())) {
              tally.Fail(absl::StrCat("garbage: code ", raw.error_code(), " ",
                                      raw.error_message()));
            }
            continue;
          }
        }
        tally.Count(kind, static_cast<int>(status.code()));
        if (must_succeed && !status.ok() &&
            !IsRetryLater(static_cast<grpc::StatusCode>(status.code()))) {
          tally.Fail(absl::StrCat(kind, ": ", status.ToString()));
        }
        // Over a limit is RESOURCE_EXHAUSTED, never an attempt (or a
        // server gone: UNAVAILABLE).
        if ((kind == "broadcast-constant" || kind == "huge-input") &&
            status.code() != absl::StatusCode::kResourceExhausted) {
          tally.Fail(absl::StrCat(kind, ": ", status.ToString()));
        }
        if (!must_succeed && status.code() == absl::StatusCode::kUnavailable) {
          tally.Fail(absl::StrCat(kind, ": UNAVAILABLE ", status.ToString()));
        }
      }
    });
  }
  for (std::thread& client : clients) client.join();

  for (const auto& [kind, codes] : tally.codes) {
    std::string line = kind + ":";
    for (const auto& [code, count] : codes) {
      absl::StrAppend(&line, " code", code, "=", count);
    }
    std::printf("%s\n", line.c_str());
  }
  int64_t peak = PeakRssBytes(pid);
  std::printf("calls: %lld, peak RSS %.1f MiB (budget %.0f MiB)\n",
              static_cast<long long>(calls.load()), peak / 1048576.0,
              kBudgetBytes / 1048576.0);
  for (const std::string& failure : tally.failures) ADD_FAILURE() << failure;

  // Still alive and still serving valid work.
  auto client = Connect(address);
  EXPECT_TRUE(client->Lower(TinyRequest(99)).ok());
  ASSERT_GT(peak, 0);
#ifndef FERRY_SANITIZED
  EXPECT_LT(peak, kBudgetBytes);
#endif
  // Every hostile kind was actually sent.
  for (const char* kind : {"broadcast-constant", "huge-input", "self-calling",
                           "garbage", "valid-lower", "large-lower"}) {
    EXPECT_GT(tally.codes.count(kind), 0u) << kind;
  }
  EXPECT_EQ(ferryd.Stop(), 0) << ferryd.log().substr(0, 4000);
}

}  // namespace
}  // namespace ferry::testing
