// End to end over loopback: every RPC, every request-level error with its
// status code and details, the cache, concurrency, the async API, the
// client's retries, metrics and request logs.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <future>
#include <new>
#include <stdexcept>
#include <thread>

#include "absl/strings/match.h"
#include "client/testing/synthetic_program.h"
#include "ferry/client.h"
#include "ferry/digest.h"
#include "ferry/v1/compiler.grpc.pb.h"
#include "ferry/version.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"
#include "runtime/verify.h"
#include "server/compiler_service.h"
#include "server/metrics.h"
#include "tests/service/service_test_support.h"

namespace ferry::testing {
namespace {

using std::chrono::milliseconds;

// A reference to a value that does not exist: malformed (FERRY-E0102).
v1::LowerRequest DanglingReferenceRequest() {
  return ParseRequestText(R"pb(
    program {
      methods {
        name: "forward"
        nodes {
          name: "a"
          input { kind: USER_INPUT }
          tensor { dtype: F32 sizes: 4 sizes: 4 }
        }
        nodes {
          name: "out"
          call {
            op: "aten::relu"
            args { value: "nope" }
          }
          tensor { dtype: F32 sizes: 4 sizes: 4 }
        }
        nodes {
          name: "output"
          output { values { value: "out" } }
        }
      }
    })pb");
}

// Well formed, but input x lives on cuda:0 (skip_h2d) and is written in
// place on the host: fails to compile (FERRY-E0804, CASES.md B6c).
v1::LowerRequest FailsToCompileRequest() {
  return ParseRequestText(R"pb(
    program {
      methods {
        name: "forward"
        nodes {
          name: "x"
          input { kind: USER_INPUT }
          tensor { dtype: F32 sizes: 4 sizes: 4 }
        }
        nodes {
          name: "y"
          input { kind: USER_INPUT }
          tensor { dtype: F32 sizes: 4 sizes: 4 }
        }
        nodes {
          name: "x1"
          call {
            op: "aten::add_.Scalar"
            args { value: "x" }
            args { float_value: 1 }
          }
          tensor { dtype: F32 sizes: 4 sizes: 4 }
        }
        nodes {
          name: "sum"
          call {
            op: "aten::add.Tensor"
            args { value: "x1" }
            args { value: "y" }
          }
          tensor { dtype: F32 sizes: 4 sizes: 4 }
          delegation_tag: "p0"
        }
        nodes {
          name: "output"
          output { values { value: "sum" } }
        }
      }
    }
    options { skip_h2d_for_method_inputs { default_value: true } })pb");
}

// What the in-process pipeline returns for `request`.
v1::Program LowerInProcess(const v1::LowerRequest& request) {
  absl::StatusOr<LowerResult> result = ferry::Lower(request);
  EXPECT_TRUE(result.ok() && result->ok);
  v1::Program program;
  if (result.ok()) ExportProgram(result->program, &program);
  return program;
}

TEST(ServiceTest, LowerReturnsTheInProcessResult) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  v1::LowerRequest request = TinyRequest();

  absl::StatusOr<v1::LowerResponse> response = client->Lower(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(response->ok());
  EXPECT_FALSE(response->cached());
  EXPECT_EQ(response->compiler_version(), kCompilerVersion);
  EXPECT_FALSE(response->request_id().empty());
  EXPECT_EQ(response->request_digest().size(), 64u);
  EXPECT_EQ(response->stats().h2d_copies(), 2);
  EXPECT_EQ(response->stats().d2h_copies(), 1);
  EXPECT_EQ(response->stats().delegates(), 1);
  EXPECT_GE(response->stats().passes_size(), 5);
  EXPECT_EQ(CanonicalBytes(response->program()),
            CanonicalBytes(LowerInProcess(request)));
}

TEST(ServiceTest, ProgramThatFailsToCompileIsAnOkResponseWithDiagnostics) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());

  absl::StatusOr<v1::LowerResponse> response =
      client->Lower(FailsToCompileRequest());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_FALSE(response->ok());
  EXPECT_FALSE(response->has_program());
  bool found = false;
  for (const v1::Diagnostic& diagnostic : response->diagnostics()) {
    if (diagnostic.code() == "FERRY-E0804") {
      found = true;
      EXPECT_EQ(diagnostic.severity(), v1::ERROR);
      ASSERT_GE(diagnostic.nodes_size(), 1);
      EXPECT_EQ(diagnostic.nodes(0), "x");
      EXPECT_EQ(diagnostic.method(), "forward");
    }
  }
  EXPECT_TRUE(found);
}

// Everything wrong with the program is in the body (REAPI's rule): a
// malformed program is an OK response, as a compile failure is.
TEST(ServiceTest, MalformedProgramIsAnOkResponseWithItsDiagnostics) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());

  absl::StatusOr<v1::LowerResponse> response =
      client->Lower(DanglingReferenceRequest());
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(client->attempts(), 1);  // not retried
  EXPECT_FALSE(response->ok());
  EXPECT_FALSE(response->has_program());
  ASSERT_EQ(response->diagnostics_size(), 1);
  const v1::Diagnostic& diagnostic = response->diagnostics(0);
  EXPECT_EQ(diagnostic.code(), "FERRY-E0102");
  EXPECT_EQ(diagnostic.method(), "forward");
  ASSERT_GE(diagnostic.nodes_size(), 1);
  EXPECT_EQ(diagnostic.nodes(0), "out");
  EXPECT_NE(diagnostic.message().find("'nope'"), std::string::npos);
  // Not cached: only successful lowerings are.
  EXPECT_EQ(server->service().cache().entries(), 0);

  // Verify reports the same diagnostics and runs nothing.
  v1::VerifyRequest verify;
  *verify.mutable_request() = DanglingReferenceRequest();
  absl::StatusOr<v1::VerifyResponse> verified = client->Verify(verify);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_FALSE(verified->lowered());
  EXPECT_FALSE(verified->ok());
  ASSERT_EQ(verified->diagnostics_size(), 1);
  EXPECT_EQ(verified->diagnostics(0).code(), "FERRY-E0102");
}

// `count` outputs, each reading a value that does not exist (FERRY-E0102
// each), the first of them named `first_name`.
v1::LowerRequest ManyDanglingReferences(int count,
                                        const std::string& first_name) {
  v1::LowerRequest request;
  v1::Method* method = request.mutable_program()->add_methods();
  method->set_name("forward");
  v1::Node* output = nullptr;
  for (int i = 0; i < count; ++i) {
    v1::Node* node = method->add_nodes();
    node->set_name(i == 0 ? first_name : absl::StrCat("r", i));
    node->mutable_call()->set_op("aten::relu");
    node->mutable_call()->add_args()->set_value(absl::StrCat("missing", i));
    node->mutable_tensor()->set_dtype(v1::F32);
    node->mutable_tensor()->add_sizes(4);
  }
  output = method->add_nodes();
  output->set_name("output");
  output->mutable_output()->add_values()->set_value(method->nodes(0).name());
  return request;
}

// ~100 errors, or one name of 4 KB or more, used to overflow gRPC's 8 KiB
// metadata limit as BadRequest details: the caller saw RESOURCE_EXHAUSTED
// "received initial metadata size exceeds limit" and nothing else.
TEST(ServiceTest, ManyErrorsAndHugeNamesComeBackCompleteInTheBody) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());

  absl::StatusOr<v1::LowerResponse> many =
      client->Lower(ManyDanglingReferences(150, "r0"));
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_FALSE(many->ok());
  int dangling = 0;
  for (const v1::Diagnostic& diagnostic : many->diagnostics()) {
    if (diagnostic.code() == "FERRY-E0102") ++dangling;
  }
  EXPECT_EQ(dangling, 150);

  const std::string long_name(5000, 'n');
  absl::StatusOr<v1::LowerResponse> named =
      client->Lower(ManyDanglingReferences(1, long_name));
  ASSERT_TRUE(named.ok()) << named.status();
  ASSERT_GE(named->diagnostics_size(), 1);
  ASSERT_GE(named->diagnostics(0).nodes_size(), 1);
  EXPECT_EQ(named->diagnostics(0).nodes(0), long_name);

  v1::VerifyRequest verify;
  *verify.mutable_request() = ManyDanglingReferences(150, long_name);
  verify.set_device(v1::VERIFY_DEVICE_SIM);
  absl::StatusOr<v1::VerifyResponse> verified = client->Verify(verify);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_FALSE(verified->lowered());
  EXPECT_GE(verified->diagnostics_size(), 150);
  EXPECT_EQ(verified->diagnostics(0).nodes(0), long_name);
}

// What is still a status (a Verify input that fits no input, a resource
// limit) stays within the metadata limit however long the names are.
TEST(ServiceTest, StatusDetailsWithHugeNamesStayUnderTheMetadataLimit) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  const std::string long_name(6000, 'q');

  v1::VerifyRequest request;
  *request.mutable_request() = TinyRequest();
  request.set_device(v1::VERIFY_DEVICE_SIM);
  v1::InputValue* value = request.mutable_inputs()->add_values();
  value->set_method(request.request().program().methods(0).name());
  value->set_input(long_name);
  value->mutable_spec()->set_dtype(v1::F32);
  value->set_data(std::string(16, '\0'));
  absl::StatusOr<v1::VerifyResponse> response = client->Verify(request);
  ASSERT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument)
      << response.status();
  std::optional<google::rpc::Status> details = ErrorDetails(response.status());
  ASSERT_TRUE(details.has_value());
  EXPECT_LT(details->ByteSizeLong() + response.status().message().size(),
            size_t{8192});
  std::optional<google::rpc::BadRequest> bad =
      ErrorDetail<google::rpc::BadRequest>(response.status());
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->field_violations(0).field(), "inputs");
  EXPECT_NE(bad->field_violations(0).description().find("qqqq"),
            std::string::npos);
}

// Requests whose specs would make the server allocate far too much.

// A 4-byte constant named `name` declared f32[n,n] with strides [0,0].
v1::LowerRequest BroadcastConstantRequest(int64_t n, const std::string& name) {
  std::string spec = absl::StrCat("dtype: F32 sizes: ", n, " sizes: ", n,
                                  " strides: 0 strides: 0");
  return ParseRequestText(absl::StrCat(
      R"pb(program { methods { name: "forward"
                               nodes { name: "w"
                                       input { kind: PARAMETER target: ")pb",
      name, R"pb(" } tensor { )pb", spec, R"pb(}
                                               }
           nodes { name: "r" call { op: "aten::relu" args { value: "w" } }
                   tensor { dtype: F32 sizes: )pb",
      n, " sizes: ", n, R"pb(}
                             }
           nodes { name: "output" output { values { value: "r" } } } }
         constants { name: ")pb",
      name, R"pb(" spec { )pb", spec, R"pb(}
                                           data: "\000\000\200?" } })pb"));
}

// One f32 user input `x` with `spec`, returned as is.
v1::LowerRequest HugeInputRequest(const std::string& spec) {
  return ParseRequestText(absl::StrCat(
      R"pb(program { methods { name: "forward"
                               nodes { name: "x"
                                       input { kind: USER_INPUT }
                                       tensor {)pb",
      spec, R"pb(}
                 }
           nodes { name: "output" output { values { value: "x" } } } } })pb"));
}

void ExpectQuota(const absl::Status& status, const std::string& subject,
                 const std::string& reason) {
  ASSERT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  std::optional<google::rpc::QuotaFailure> quota =
      ErrorDetail<google::rpc::QuotaFailure>(status);
  ASSERT_TRUE(quota.has_value()) << status;
  ASSERT_EQ(quota->violations_size(), 1);
  EXPECT_EQ(quota->violations(0).subject(), subject);
  std::optional<google::rpc::ErrorInfo> info =
      ErrorDetail<google::rpc::ErrorInfo>(status);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), reason);
}

TEST(ServiceTest, OverResourceLimitsIsResourceExhaustedBeforeAnyAllocation) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());

  // Made contiguous, 40 GB (bad_alloc aborted ferryd).
  v1::VerifyRequest verify;
  *verify.mutable_request() = BroadcastConstantRequest(100000, "w");
  verify.set_device(v1::VERIFY_DEVICE_SIM);
  ExpectQuota(client->Lower(verify.request()).status(),
              "program.constants['w']", "TENSOR_TOO_LARGE");
  ExpectQuota(client->Verify(verify).status(), "program.constants['w']",
              "TENSOR_TOO_LARGE");
  // 256 MB from an 81-byte request: over max_expansion.
  ExpectQuota(client->Lower(BroadcastConstantRequest(8000, "w")).status(),
              "program.constants['w']", "EXPANSION_TOO_LARGE");

  // Verify inputs: 1.6 GB (17 s, then bad_alloc), a storage offset of 2^32
  // elements (16 GiB zero-filled), 40 GB.
  for (const char* spec : {"dtype: F32 sizes: 20000 sizes: 20000",
                           "dtype: F32 sizes: 4 storage_offset: 4294967296",
                           "dtype: F32 sizes: 100000 sizes: 100000"}) {
    v1::VerifyRequest huge;
    *huge.mutable_request() = HugeInputRequest(spec);
    huge.set_device(v1::VERIFY_DEVICE_SIM);
    ExpectQuota(client->Verify(huge).status(),
                "program.methods['forward'].nodes['x']", "TENSOR_TOO_LARGE");
    // Lowering it allocates nothing of the sort, so it lowers.
    absl::StatusOr<v1::LowerResponse> lowered = client->Lower(huge.request());
    ASSERT_TRUE(lowered.ok()) << spec << ": " << lowered.status();
    EXPECT_TRUE(lowered->ok());
  }

  // Two values of 2^61 bytes each: planning their offsets would overflow.
  v1::LowerRequest vast =
      HugeInputRequest("dtype: F32 sizes: 576460752303423488");
  v1::Method* method = vast.mutable_program()->mutable_methods(0);
  *method->add_nodes() = method->nodes(0);
  method->mutable_nodes(2)->set_name("y");
  method->mutable_nodes()->SwapElements(1, 2);  // the output stays last
  ExpectQuota(client->Lower(vast).status(),
              "program.methods['forward'].nodes['y']", "TENSOR_TOO_LARGE");

  // A resource error naming a 5 KB constant still fits the trailers.
  absl::Status named =
      client->Lower(BroadcastConstantRequest(100000, std::string(5000, 'c')))
          .status();
  ASSERT_EQ(named.code(), absl::StatusCode::kResourceExhausted) << named;
  ASSERT_TRUE(ErrorDetail<google::rpc::QuotaFailure>(named).has_value());

  // The server goes on.
  absl::StatusOr<v1::LowerResponse> tiny = client->Lower(TinyRequest());
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_TRUE(tiny->ok());
}

TEST(ServiceTest, VerifyBytesAreLimitedAsAWhole) {
  ServerConfig config = LoopbackConfig();
  config.max_verify_bytes = int64_t{8} << 20;
  auto server = StartServer(config);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  absl::StatusOr<v1::GetCapabilitiesResponse> caps = client->GetCapabilities();
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->limits().max_verify_bytes(), int64_t{8} << 20);
  EXPECT_EQ(caps->limits().max_tensor_bytes(), int64_t{1} << 30);
  EXPECT_EQ(caps->limits().max_expansion(), 16);
  EXPECT_EQ(caps->limits().max_memory_bytes(), config.max_memory_bytes);

  // 4 MiB each, but generated, run twice and returned twice: over 8 MiB.
  v1::VerifyRequest request;
  *request.mutable_request() =
      HugeInputRequest("dtype: F32 sizes: 1024 sizes: 1024");
  request.set_device(v1::VERIFY_DEVICE_SIM);
  absl::Status status = client->Verify(request).status();
  ASSERT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  std::optional<google::rpc::ErrorInfo> info =
      ErrorDetail<google::rpc::ErrorInfo>(status);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "VERIFY_TOO_LARGE");
  EXPECT_NE(status.message().find("max_verify_bytes"), std::string::npos)
      << status;
  // A small one still verifies.
  *request.mutable_request() = HugeInputRequest("dtype: F32 sizes: 64");
  absl::StatusOr<v1::VerifyResponse> small = client->Verify(request);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE(small->ok()) << small->report().summary();
}

// The process-wide budget refuses what does not fit now, with RetryInfo;
// the cache is charged the memory its entries take.
TEST(ServiceTest, MemoryBudgetRefusesWhatDoesNotFitAndCountsTheCache) {
  ServerConfig config = LoopbackConfig();
  config.max_memory_bytes = int64_t{4} << 20;
  config.cache_bytes = int64_t{1} << 20;
  config.max_verify_bytes = int64_t{2} << 20;
  auto server = StartServer(config);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address(), [](ClientOptions& options) {
    options.retry.max_attempts = 1;  // see the refusal itself
  });

  // ~200 KB on the wire: an estimated 4+ MiB once parsed and lowered.
  absl::Status refused = client->Lower(SyntheticChainRequest(5000)).status();
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(ErrorDetail<google::rpc::RetryInfo>(refused).has_value());
  std::optional<google::rpc::QuotaFailure> quota =
      ErrorDetail<google::rpc::QuotaFailure>(refused);
  ASSERT_TRUE(quota.has_value());
  EXPECT_EQ(quota->violations(0).subject(), "memory");

  absl::StatusOr<v1::LowerResponse> small = client->Lower(TinyRequest());
  ASSERT_TRUE(small.ok()) << small.status();
  ASSERT_TRUE(small->ok());
  const CompilerService& service = server->service();
  ASSERT_EQ(service.cache().entries(), 1);
  // What the entry holds: the whole response serialized (a hit in wire form
  // is sent those bytes) and the message of its fields but the program.
  EXPECT_GT(service.cache().bytes(),
            static_cast<int64_t>(small->ByteSizeLong()) +
                static_cast<int64_t>(sizeof(v1::LowerResponse)));
  // Once answered, only the cache holds memory.
  EXPECT_TRUE(Eventually(
      [&] { return service.memory().used() == service.cache().bytes(); }));
}

// Memory admission: each job is charged an estimate per node before it
// starts. One that could never fit is refused at once (QuotaFailure, no
// RetryInfo); jobs that fit one at a time but not together wait for each
// other instead of failing.
TEST(ServiceTest, MemoryAdmissionQueuesWhatFitsAndRefusesWhatNeverWill) {
  ServerConfig config = LoopbackConfig();
  config.max_memory_bytes = int64_t{64} << 20;
  config.cache_bytes = 0;
  config.max_verify_bytes = int64_t{32} << 20;
  config.memory_wait = std::chrono::seconds(20);
  auto server = StartServer(config);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address(), [](ClientOptions& options) {
    options.retry.max_attempts = 1;
  });

  // 12k nodes: ~0.7 MB on the wire (fits on arrival), 72 MiB of pipeline.
  const v1::LowerRequest never = SyntheticChainRequest(12000);
  ASSERT_GT(JobMemoryEstimate(CountNodes(never.program())),
            config.max_memory_bytes);
  absl::Status refused = client->Lower(never).status();
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_FALSE(ErrorDetail<google::rpc::RetryInfo>(refused).has_value());
  std::optional<google::rpc::QuotaFailure> quota =
      ErrorDetail<google::rpc::QuotaFailure>(refused);
  ASSERT_TRUE(quota.has_value());
  EXPECT_EQ(quota->violations(0).subject(), "memory_estimate_bytes");

  // 6k nodes: ~36 MiB each, so two do not fit at once. Both workers start
  // together; one waits for the other, and every call succeeds.
  auto held = Connect(server->address(), [](ClientOptions& options) {
    options.retry.max_attempts = 1;
  });
  std::vector<std::future<absl::StatusOr<v1::LowerResponse>>> calls;
  for (int i = 0; i < 4; ++i) {
    calls.push_back(std::async(std::launch::async, [&, i] {
      return held->Lower(SyntheticChainRequest(6000, 100 + i));
    }));
  }
  for (auto& call : calls) {
    absl::StatusOr<v1::LowerResponse> lowered = call.get();
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    EXPECT_TRUE(lowered->ok());
  }
  std::string metrics = server->RenderMetrics();
  EXPECT_TRUE(absl::StrContains(
      metrics, "ferry_memory_wait_seconds_count{kind=\"job\"}"))
      << "no job waited for the budget";
  EXPECT_TRUE(
      Eventually([&] { return server->service().memory().used() == 0; }));
}

// An exception anywhere in a job (here: thrown at its start) is that call's
// status; the server goes on.
TEST(ServiceTest, ExceptionsInAJobAreStatusesAndTheServerGoesOn) {
  std::atomic<int> mode{0};  // 0: none, 1: bad_alloc, 2: runtime_error
  ServerHooks hooks;
  hooks.before_job = [&mode](absl::string_view) {
    if (mode.load() == 1) throw std::bad_alloc();
    if (mode.load() == 2) throw std::runtime_error("injected failure");
  };
  auto server = StartServer(LoopbackConfig(), hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address(), [](ClientOptions& options) {
    options.retry.max_attempts = 1;
  });
  v1::VerifyRequest verify;
  *verify.mutable_request() = TinyRequest();
  verify.set_device(v1::VERIFY_DEVICE_SIM);
  CallOptions bypass;
  bypass.bypass_cache = true;

  mode = 1;
  absl::Status lower = client->Lower(TinyRequest(), bypass).status();
  EXPECT_EQ(lower.code(), absl::StatusCode::kResourceExhausted) << lower;
  std::optional<google::rpc::ErrorInfo> info =
      ErrorDetail<google::rpc::ErrorInfo>(lower);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "OUT_OF_MEMORY");
  EXPECT_EQ(client->Verify(verify).status().code(),
            absl::StatusCode::kResourceExhausted);

  mode = 2;
  lower = client->Lower(TinyRequest(), bypass).status();
  EXPECT_EQ(lower.code(), absl::StatusCode::kInternal) << lower;
  EXPECT_NE(lower.message().find("injected failure"), std::string::npos);
  EXPECT_EQ(client->Verify(verify).status().code(),
            absl::StatusCode::kInternal);

  mode = 0;
  absl::StatusOr<v1::LowerResponse> fine = client->Lower(TinyRequest());
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_TRUE(fine->ok());
  absl::StatusOr<v1::VerifyResponse> verified = client->Verify(verify);
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_TRUE(verified->ok());
  // Nothing is left charged to the budget but the cache.
  EXPECT_TRUE(Eventually([&] {
    return server->service().memory().used() ==
           server->service().cache().bytes();
  }));
}

TEST(ServiceTest, VerifyOnSimLowersExecutesAndCompares) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  v1::VerifyRequest request;
  *request.mutable_request() = SyntheticChainRequest(40);
  request.set_device(v1::VERIFY_DEVICE_SIM);
  request.set_seed(7);
  request.set_include_program(true);

  absl::StatusOr<v1::VerifyResponse> response = client->Verify(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(response->lowered());
  EXPECT_TRUE(response->ok()) << response->report().summary();
  EXPECT_EQ(response->device(), "sim");
  EXPECT_EQ(response->report().device(), "sim");
  ASSERT_EQ(response->report().outputs_size(), 1);
  EXPECT_TRUE(response->report().outputs(0).match());
  EXPECT_EQ(response->report().outputs(0).dtype(), "f32");
  EXPECT_EQ(response->compiler_version(), kCompilerVersion);
  EXPECT_TRUE(response->has_program());
  EXPECT_GT(response->stats().h2d_copies(), 0);
}

TEST(ServiceTest, VerifyOfProgramThatFailsToCompileRunsNothing) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  v1::VerifyRequest request;
  *request.mutable_request() = FailsToCompileRequest();
  request.set_device(v1::VERIFY_DEVICE_SIM);

  absl::StatusOr<v1::VerifyResponse> response = client->Verify(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_FALSE(response->lowered());
  EXPECT_FALSE(response->ok());
  EXPECT_TRUE(response->device().empty());
  EXPECT_GT(response->diagnostics_size(), 0);
}

TEST(ServiceTest, VerifyWithAnInputThatDoesNotFitIsInvalidArgument) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  v1::VerifyRequest request;
  *request.mutable_request() = TinyRequest();
  request.set_device(v1::VERIFY_DEVICE_SIM);
  v1::InputValue* value = request.mutable_inputs()->add_values();
  value->set_method(request.request().program().methods(0).name());
  value->set_input("no_such_input");
  value->mutable_spec()->set_dtype(v1::F32);
  value->set_data(std::string(16, '\0'));

  absl::StatusOr<v1::VerifyResponse> response = client->Verify(request);
  ASSERT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument)
      << response.status();
  std::optional<google::rpc::BadRequest> bad =
      ErrorDetail<google::rpc::BadRequest>(response.status());
  ASSERT_TRUE(bad.has_value());
  ASSERT_EQ(bad->field_violations_size(), 1);
  EXPECT_EQ(bad->field_violations(0).field(), "inputs");
  EXPECT_NE(bad->field_violations(0).description().find("no_such_input"),
            std::string::npos);
}

TEST(ServiceTest, VerifyOnMissingDeviceIsFailedPrecondition) {
  ServerHooks hooks;
  hooks.force_no_cuda = true;
  auto server = StartServer(LoopbackConfig(), hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  v1::VerifyRequest request;
  *request.mutable_request() = TinyRequest();
  request.set_device(v1::VERIFY_DEVICE_CUDA);

  absl::StatusOr<v1::VerifyResponse> response = client->Verify(request);
  ASSERT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition)
      << response.status();
  std::optional<google::rpc::PreconditionFailure> failure =
      ErrorDetail<google::rpc::PreconditionFailure>(response.status());
  ASSERT_TRUE(failure.has_value());
  ASSERT_EQ(failure->violations_size(), 1);
  EXPECT_EQ(failure->violations(0).type(), "DEVICE");
  EXPECT_EQ(failure->violations(0).subject(), "cuda");
}

// Where the server sees a GPU, Verify on CUDA (and on AUTO) runs there and
// the GPU is advertised; elsewhere CUDA is refused and AUTO runs on sim.
TEST(ServiceTest, VerifyRunsOnTheGpuWhereOneIsVisible) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  v1::VerifyRequest request;
  *request.mutable_request() = SyntheticChainRequest(40);
  request.set_seed(11);

  request.set_device(v1::VERIFY_DEVICE_AUTO);
  absl::StatusOr<v1::VerifyResponse> automatic = client->Verify(request);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_TRUE(automatic->ok()) << automatic->report().summary();
  EXPECT_EQ(automatic->device(), CudaAvailable() ? "cuda" : "sim");

  request.set_device(v1::VERIFY_DEVICE_CUDA);
  absl::StatusOr<v1::VerifyResponse> cuda = client->Verify(request);
  absl::StatusOr<v1::GetCapabilitiesResponse> caps = client->GetCapabilities();
  ASSERT_TRUE(caps.ok());
  bool advertised =
      std::find(caps->verify_devices().begin(), caps->verify_devices().end(),
                v1::VERIFY_DEVICE_CUDA) != caps->verify_devices().end();
  EXPECT_EQ(advertised, CudaAvailable());
  EXPECT_EQ(client->CheckHealth("ferry.v1.Compiler/gpu").value_or(false),
            CudaAvailable());
  if (CudaAvailable()) {
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    EXPECT_TRUE(cuda->ok()) << cuda->report().summary();
    EXPECT_EQ(cuda->device(), "cuda");
    EXPECT_EQ(
        server->RenderMetrics().find(
            "ferry_verifications_total{device=\"cuda\",result=\"match\"} 2") !=
            std::string::npos,
        true);
  } else {
    EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(ServiceTest, GetCapabilitiesAdvertisesLimitsPassesAndDevices) {
  ServerConfig config = LoopbackConfig();
  config.max_message_bytes = 1 << 20;
  config.max_nodes = 5000;
  config.workers = 3;
  config.queue_depth = 7;
  config.default_deadline = std::chrono::seconds(9);
  config.max_deadline = std::chrono::seconds(11);
  ServerHooks hooks;
  hooks.force_no_cuda = true;
  auto server = StartServer(config, hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());

  absl::StatusOr<v1::GetCapabilitiesResponse> caps = client->GetCapabilities();
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->api_version(), kApiVersion);
  EXPECT_EQ(caps->compiler_version(), kCompilerVersion);
  EXPECT_EQ(caps->limits().max_request_bytes(), 1 << 20);
  EXPECT_EQ(caps->limits().max_nodes(), 5000);
  EXPECT_EQ(caps->limits().max_concurrent_jobs(), 3);
  EXPECT_EQ(caps->limits().queue_depth(), 7);
  EXPECT_EQ(caps->limits().default_deadline_ms(), 9000);
  EXPECT_EQ(caps->limits().max_deadline_ms(), 11000);
  std::vector<std::string> passes(caps->passes().begin(), caps->passes().end());
  EXPECT_EQ(passes, PipelinePassNames());
  EXPECT_NE(std::find(passes.begin(), passes.end(), "partition"), passes.end());
  EXPECT_NE(std::find(passes.begin(), passes.end(), "place_and_copy"),
            passes.end());
  std::vector<std::string> options(caps->lower_options().begin(),
                                   caps->lower_options().end());
  EXPECT_NE(
      std::find(options.begin(), options.end(), "skip_h2d_for_method_inputs"),
      options.end());
  std::vector<std::string> devices(caps->devices().begin(),
                                   caps->devices().end());
  EXPECT_NE(std::find(devices.begin(), devices.end(), "sim"), devices.end());
  EXPECT_EQ(caps->verify_devices_size(), 2);  // auto, sim: no GPU here
  EXPECT_EQ(caps->digest_function(), "sha256");
  EXPECT_FALSE(caps->requires_token());
}

TEST(ServiceTest, OversizeRequestIsResourceExhaustedWithQuotaFailure) {
  ServerConfig config = LoopbackConfig();
  config.max_message_bytes = 3000;
  auto server = StartServer(config);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  v1::LowerRequest request = SyntheticChainRequest(80);
  ASSERT_GT(request.ByteSizeLong(), 3000u);
  ASSERT_LT(request.ByteSizeLong(), 2 * 3000u);  // reaches the service

  absl::StatusOr<v1::LowerResponse> response = client->Lower(request);
  ASSERT_EQ(response.status().code(), absl::StatusCode::kResourceExhausted)
      << response.status();
  std::optional<google::rpc::QuotaFailure> quota =
      ErrorDetail<google::rpc::QuotaFailure>(response.status());
  ASSERT_TRUE(quota.has_value());
  ASSERT_EQ(quota->violations_size(), 1);
  EXPECT_EQ(quota->violations(0).subject(), "request_bytes");

  // Far over the limit (past 2x + 64KiB), gRPC itself refuses the message,
  // with the same code but no details.
  v1::LowerRequest huge_request = SyntheticChainRequest(4000);
  ASSERT_GT(huge_request.ByteSizeLong(), 2 * 3000u + 65536u);
  absl::StatusOr<v1::LowerResponse> huge = client->Lower(huge_request);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(
      ErrorDetail<google::rpc::QuotaFailure>(huge.status()).has_value());
}

TEST(ServiceTest, ProgramOverTheNodeLimitIsResourceExhausted) {
  ServerConfig config = LoopbackConfig();
  config.max_nodes = 50;
  auto server = StartServer(config);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());

  absl::StatusOr<v1::LowerResponse> response =
      client->Lower(SyntheticChainRequest(100));
  ASSERT_EQ(response.status().code(), absl::StatusCode::kResourceExhausted);
  std::optional<google::rpc::QuotaFailure> quota =
      ErrorDetail<google::rpc::QuotaFailure>(response.status());
  ASSERT_TRUE(quota.has_value());
  EXPECT_EQ(quota->violations(0).subject(), "nodes");
  std::optional<google::rpc::ErrorInfo> info =
      ErrorDetail<google::rpc::ErrorInfo>(response.status());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "TOO_MANY_NODES");
}

TEST(ServiceTest, FullQueueIsResourceExhaustedWithRetryInfo) {
  ServerConfig config = LoopbackConfig();
  config.workers = 1;
  config.queue_depth = 1;
  JobGate gate;
  ServerHooks hooks;
  hooks.before_job = gate.Hook();
  auto server = StartServer(config, hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address(), [](ClientOptions& options) {
    options.retry.max_attempts = 1;  // the refusal itself, not retried
  });

  std::promise<absl::Status> running, queued;
  client->LowerAsync(TinyRequest(1), [&](absl::StatusOr<v1::LowerResponse> r) {
    running.set_value(r.status());
  });
  ASSERT_TRUE(gate.WaitForArrivals(1));  // the only worker is busy
  client->LowerAsync(TinyRequest(2), [&](absl::StatusOr<v1::LowerResponse> r) {
    queued.set_value(r.status());
  });
  ASSERT_TRUE(
      Eventually([&] { return server->service().Gauges().queue_depth == 1; }));

  absl::StatusOr<v1::LowerResponse> refused = client->Lower(TinyRequest(3));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  std::optional<google::rpc::RetryInfo> retry =
      ErrorDetail<google::rpc::RetryInfo>(refused.status());
  ASSERT_TRUE(retry.has_value());
  EXPECT_GT(retry->retry_delay().seconds() * 1000 +
                retry->retry_delay().nanos() / 1'000'000,
            0);

  gate.Open();
  EXPECT_TRUE(running.get_future().get().ok());
  EXPECT_TRUE(queued.get_future().get().ok());
}

// QUEUE_FULL carries its RetryInfo delay as grpc-retry-pushback-ms too: gRPC
// retries the call then, and it succeeds once the queue has room.
TEST(ServiceTest, FullQueueIsRetriedAfterTheRetryInfoDelay) {
  ServerConfig config = LoopbackConfig();
  config.workers = 1;
  config.queue_depth = 1;
  JobGate gate;
  ServerHooks hooks;
  hooks.before_job = gate.Hook();
  auto server = StartServer(config, hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());

  std::promise<absl::Status> running, queued, retried;
  client->LowerAsync(TinyRequest(1), [&](absl::StatusOr<v1::LowerResponse> r) {
    running.set_value(r.status());
  });
  ASSERT_TRUE(gate.WaitForArrivals(1));
  client->LowerAsync(TinyRequest(2), [&](absl::StatusOr<v1::LowerResponse> r) {
    queued.set_value(r.status());
  });
  ASSERT_TRUE(
      Eventually([&] { return server->service().Gauges().queue_depth == 1; }));
  client->LowerAsync(TinyRequest(3), [&](absl::StatusOr<v1::LowerResponse> r) {
    retried.set_value(r.status());
  });
  // The first attempt of call 3 is refused (and counted) ...
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(
        server->RenderMetrics(),
        "ferry_requests_total{code=\"RESOURCE_EXHAUSTED\",method=\"Lower\"}");
  }));
  // ... then the queue drains and a retry gets in.
  gate.Open();
  EXPECT_TRUE(running.get_future().get().ok());
  EXPECT_TRUE(queued.get_future().get().ok());
  absl::Status third = retried.get_future().get();
  EXPECT_TRUE(third.ok()) << third;
  EXPECT_EQ(client->attempts(), 3);
}

// Destroying a Client with a call in flight cancels it and returns only once
// its callback has run: no callback runs later, and the channel is not
// released on a gRPC thread (which aborted at exit, now and then).
TEST(ServiceTest, DestroyingTheClientCancelsPendingCallsAndWaits) {
  JobGate gate;
  ServerHooks hooks;
  hooks.before_job = gate.Hook();
  auto server = StartServer(LoopbackConfig(), hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  std::atomic<int> callbacks{0};
  absl::StatusCode code = absl::StatusCode::kOk;
  std::shared_ptr<AsyncCall> handle = client->LowerAsync(
      TinyRequest(), [&](absl::StatusOr<v1::LowerResponse> r) {
        code = r.status().code();
        ++callbacks;
      });
  ASSERT_TRUE(gate.WaitForArrivals(1));
  client.reset();
  EXPECT_EQ(callbacks.load(), 1);
  EXPECT_EQ(code, absl::StatusCode::kCancelled);
  handle->Cancel();  // the handle outlives the client harmlessly
  gate.Open();
  EXPECT_EQ(callbacks.load(), 1);
}

TEST(ServiceTest, DeadlineThatPassesWhileQueuedIsDeadlineExceeded) {
  JobGate gate;
  ServerHooks hooks;
  hooks.before_job = gate.Hook();
  auto server = StartServer(LoopbackConfig(), hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());

  CallOptions call;
  // Long enough for the call to reach its worker on a loaded machine (a
  // call whose deadline passes before the server sees it never arrives at
  // the gate); it still passes while the gate holds the job.
  call.deadline = milliseconds(2000);
  std::promise<absl::Status> done;
  client->LowerAsync(
      TinyRequest(),
      [&](absl::StatusOr<v1::LowerResponse> r) { done.set_value(r.status()); },
      call);
  ASSERT_TRUE(gate.WaitForArrivals(1));
  EXPECT_EQ(done.get_future().get().code(),
            absl::StatusCode::kDeadlineExceeded);
  // The server learns of the deadline on its own clock, a moment after the
  // client did: its copy of the deadline starts when the call arrives, and
  // the client's reset may still be on its way. Only once gRPC has told the
  // server may the job go on; it used to race the reset, and now and then a
  // loaded machine finished the work first.
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(server->RenderMetrics(),
                             "ferry_cancellations_total 1");
  }));
  gate.Open();
  // The server notices at its next check and does not finish the work.
  EXPECT_TRUE(Eventually([&] {
    return server->metrics().RequestCount("Lower", "DEADLINE_EXCEEDED") == 1;
  }));
  EXPECT_EQ(server->metrics().RequestCount("Lower", "OK"), 0);
}

TEST(ServiceTest, ServerShortensDeadlinesToItsMaximum) {
  ServerConfig config = LoopbackConfig();
  config.default_deadline = milliseconds(100);
  config.max_deadline = milliseconds(200);
  ServerHooks hooks;
  hooks.before_job = [](absl::string_view) {
    std::this_thread::sleep_for(milliseconds(400));
  };
  auto server = StartServer(config, hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());

  CallOptions call;
  call.deadline = std::chrono::seconds(20);
  absl::StatusOr<v1::LowerResponse> response =
      client->Lower(TinyRequest(), call);
  ASSERT_EQ(response.status().code(), absl::StatusCode::kDeadlineExceeded);
  // Answered by the server (its message), not by the client's own timer.
  EXPECT_NE(response.status().message().find("deadline exceeded"),
            std::string::npos)
      << response.status();
}

TEST(ServiceTest, CancelledCallIsCancelledOnTheServer) {
  JobGate gate;
  ServerHooks hooks;
  hooks.before_job = gate.Hook();
  auto server = StartServer(LoopbackConfig(), hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());

  std::promise<absl::Status> done;
  std::shared_ptr<AsyncCall> call = client->LowerAsync(
      TinyRequest(),
      [&](absl::StatusOr<v1::LowerResponse> r) { done.set_value(r.status()); });
  ASSERT_TRUE(gate.WaitForArrivals(1));
  call->Cancel();
  EXPECT_EQ(done.get_future().get().code(), absl::StatusCode::kCancelled);
  // The server has seen the cancellation before the job goes on.
  ASSERT_TRUE(Eventually([&] {
    return server->RenderMetrics().find("ferry_cancellations_total 1") !=
           std::string::npos;
  }));
  gate.Open();
  EXPECT_TRUE(Eventually([&] {
    return server->metrics().RequestCount("Lower", "CANCELLED") == 1;
  }));
  EXPECT_EQ(server->metrics().RequestCount("Lower", "OK"), 0);
}

TEST(ServiceTest, RepeatedRequestIsServedFromTheCache) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  v1::LowerRequest request = SyntheticChainRequest(60);

  absl::StatusOr<v1::LowerResponse> first = client->Lower(request);
  absl::StatusOr<v1::LowerResponse> second = client->Lower(request);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_FALSE(first->cached());
  EXPECT_TRUE(second->cached());
  EXPECT_EQ(first->request_digest(), second->request_digest());
  EXPECT_NE(first->request_id(), second->request_id());
  EXPECT_EQ(CanonicalBytes(first->program()),
            CanonicalBytes(second->program()));
  EXPECT_EQ(server->service().cache().entries(), 1);

  // Different options: a different key.
  v1::LowerRequest other = request;
  other.mutable_options()->set_error_on_per_call_copies(true);
  absl::StatusOr<v1::LowerResponse> third = client->Lower(other);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->cached());
  EXPECT_NE(third->request_digest(), first->request_digest());

  // A bypassing call neither reads nor fills the cache.
  CallOptions bypass;
  bypass.bypass_cache = true;
  absl::StatusOr<v1::LowerResponse> fourth = client->Lower(request, bypass);
  ASSERT_TRUE(fourth.ok());
  EXPECT_FALSE(fourth->cached());

  std::string metrics = server->RenderMetrics();
  EXPECT_NE(metrics.find("ferry_cache_lookups_total{result=\"hit\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics.find("ferry_cache_lookups_total{result=\"miss\"} 2"),
            std::string::npos);
}

// A hit is answered with the bytes stored when the result was computed plus
// the call's own request id and cached flag: the caller reads exactly the
// computed response but for those two fields.
TEST(ServiceTest, CacheHitIsTheComputedResponseButItsIdAndFlag) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  v1::LowerRequest request = SyntheticChainRequest(200);
  absl::StatusOr<v1::LowerResponse> first = client->Lower(request);
  ASSERT_TRUE(first.ok() && first->ok());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<v1::LowerResponse> hit = client->Lower(request);
    ASSERT_TRUE(hit.ok());
    EXPECT_TRUE(hit->cached());
    EXPECT_FALSE(hit->request_id().empty());
    EXPECT_NE(hit->request_id(), first->request_id());
    v1::LowerResponse as_computed = *hit;
    as_computed.set_cached(false);
    as_computed.set_request_id(first->request_id());
    EXPECT_EQ(DeterministicBytes(as_computed), DeterministicBytes(*first));
  }
  EXPECT_EQ(server->service().cache().entries(), 1);
}

TEST(ServiceTest, FailedCompilationsAreNotCached) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  ASSERT_TRUE(client->Lower(FailsToCompileRequest()).ok());
  absl::StatusOr<v1::LowerResponse> again =
      client->Lower(FailsToCompileRequest());
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->cached());
  EXPECT_EQ(server->service().cache().entries(), 0);
}

TEST(ServiceTest, IdenticalConcurrentRequestsComputeOnce) {
  JobGate gate;
  std::atomic<int> jobs{0};
  ServerHooks hooks;
  auto hold = gate.Hook();
  hooks.before_job = [&](absl::string_view method) {
    ++jobs;
    hold(method);
  };
  auto server = StartServer(LoopbackConfig(), hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  v1::LowerRequest request = SyntheticChainRequest(80);

  constexpr int kCalls = 4;
  std::vector<std::promise<absl::StatusOr<v1::LowerResponse>>> results(kCalls);
  client->LowerAsync(request, [&](absl::StatusOr<v1::LowerResponse> r) {
    results[0].set_value(std::move(r));
  });
  ASSERT_TRUE(gate.WaitForArrivals(1));
  for (int i = 1; i < kCalls; ++i) {
    client->LowerAsync(request, [&, i](absl::StatusOr<v1::LowerResponse> r) {
      results[i].set_value(std::move(r));
    });
  }
  ASSERT_TRUE(Eventually([&] {
    return server->RenderMetrics().find("ferry_cache_deduplicated_total 3") !=
           std::string::npos;
  }));
  gate.Open();

  std::string expected = CanonicalBytes(LowerInProcess(request));
  int cached = 0;
  for (auto& result : results) {
    absl::StatusOr<v1::LowerResponse> response = result.get_future().get();
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(CanonicalBytes(response->program()), expected);
    cached += response->cached() ? 1 : 0;
  }
  EXPECT_EQ(jobs.load(), 1);
  EXPECT_EQ(cached, kCalls - 1);
}

TEST(ServiceTest, ConcurrentClientsGetCorrectIdenticalResults) {
  ServerConfig config = LoopbackConfig();
  config.queue_depth = 64;
  auto server = StartServer(config);
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 8;
  constexpr int kCallsEach = 4;
  // Two programs, so concurrent calls are a mix of different work.
  std::vector<v1::LowerRequest> requests = {SyntheticChainRequest(200, 1),
                                            SyntheticChainRequest(120, 2)};
  std::vector<std::string> expected;
  for (const auto& request : requests) {
    expected.push_back(CanonicalBytes(LowerInProcess(request)));
  }

  std::vector<std::thread> threads;
  std::atomic<int> correct{0};
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto client = Connect(server->address());
      CallOptions call;
      call.bypass_cache = true;  // every call computes
      for (int i = 0; i < kCallsEach; ++i) {
        size_t which = static_cast<size_t>(c + i) % requests.size();
        absl::StatusOr<v1::LowerResponse> response =
            client->Lower(requests[which], call);
        if (response.ok() && response->ok() &&
            CanonicalBytes(response->program()) == expected[which]) {
          ++correct;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(correct.load(), kClients * kCallsEach);
  EXPECT_EQ(server->metrics().RequestCount("Lower", "OK"),
            kClients * kCallsEach);
}

TEST(ServiceTest, AsyncApiDeliversEveryMethod) {
  auto server = StartServer(LoopbackConfig());
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());

  std::promise<absl::StatusOr<v1::LowerResponse>> lowered;
  std::promise<absl::StatusOr<v1::VerifyResponse>> verified;
  std::promise<absl::StatusOr<v1::GetCapabilitiesResponse>> caps;
  v1::VerifyRequest verify;
  *verify.mutable_request() = TinyRequest();
  verify.set_device(v1::VERIFY_DEVICE_SIM);
  client->LowerAsync(TinyRequest(), [&](absl::StatusOr<v1::LowerResponse> r) {
    lowered.set_value(std::move(r));
  });
  client->VerifyAsync(verify, [&](absl::StatusOr<v1::VerifyResponse> r) {
    verified.set_value(std::move(r));
  });
  client->GetCapabilitiesAsync(
      [&](absl::StatusOr<v1::GetCapabilitiesResponse> r) {
        caps.set_value(std::move(r));
      });

  absl::StatusOr<v1::LowerResponse> lower_result = lowered.get_future().get();
  ASSERT_TRUE(lower_result.ok()) << lower_result.status();
  EXPECT_TRUE(lower_result->ok());
  absl::StatusOr<v1::VerifyResponse> verify_result =
      verified.get_future().get();
  ASSERT_TRUE(verify_result.ok()) << verify_result.status();
  EXPECT_TRUE(verify_result->ok());
  absl::StatusOr<v1::GetCapabilitiesResponse> caps_result =
      caps.get_future().get();
  ASSERT_TRUE(caps_result.ok());
  EXPECT_EQ(caps_result->api_version(), kApiVersion);

  // Errors arrive through the callback too.
  std::promise<absl::Status> failed;
  client->LowerAsync(BroadcastConstantRequest(100000, "w"),
                     [&](absl::StatusOr<v1::LowerResponse> r) {
                       failed.set_value(r.status());
                     });
  EXPECT_EQ(failed.get_future().get().code(),
            absl::StatusCode::kResourceExhausted);
}

// A Compiler whose Lower always fails with `code` (and, when given, the
// grpc-retry-pushback-ms trailer), counting the attempts that reach it:
// gRPC's retries, which the client's attempts() does not see.
class RefusingCompiler final : public v1::Compiler::Service {
 public:
  RefusingCompiler(grpc::StatusCode code, std::string pushback = "")
      : code_(code), pushback_(std::move(pushback)) {}
  grpc::Status Lower(grpc::ServerContext* context, const v1::LowerRequest*,
                     v1::LowerResponse*) override {
    ++attempts;
    if (!pushback_.empty()) {
      context->AddTrailingMetadata("grpc-retry-pushback-ms", pushback_);
    }
    return grpc::Status(code_, "refused by the test");
  }
  std::atomic<int> attempts{0};

 private:
  const grpc::StatusCode code_;
  const std::string pushback_;
};

struct RefusingServer {
  explicit RefusingServer(grpc::StatusCode code, std::string pushback = "")
      : service(code, std::move(pushback)) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    address = absl::StrCat("127.0.0.1:", port);
  }
  ~RefusingServer() { server->Shutdown(); }
  RefusingCompiler service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

TEST(ServiceTest, ClientRetriesUnavailableUntilTheServerIsUp) {
  // Find a free port, then leave it closed while the client starts.
  std::string address;
  {
    auto probe = StartServer(LoopbackConfig());
    ASSERT_NE(probe, nullptr);
    address = probe->address();
  }
  // gRPC's retries (the service config): 5 attempts, 0.2 s doubling to 2 s,
  // about 3 s in all, longer than gRPC's 1 s reconnect backoff.
  auto client = Connect(address, [](ClientOptions& options) {
    options.retry.max_attempts = 5;
    options.retry.initial_backoff = milliseconds(200);
    options.retry.max_backoff = milliseconds(2000);
  });
  std::promise<absl::StatusOr<v1::LowerResponse>> sync_result;
  std::thread caller(
      [&] { sync_result.set_value(client->Lower(TinyRequest())); });
  std::promise<absl::StatusOr<v1::GetCapabilitiesResponse>> async_result;
  client->GetCapabilitiesAsync(
      [&](absl::StatusOr<v1::GetCapabilitiesResponse> r) {
        async_result.set_value(std::move(r));
      });
  ASSERT_TRUE(Eventually([&] { return client->attempts() >= 2; }));

  ServerConfig config = LoopbackConfig();
  config.listen = address;
  auto server = StartServer(config);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<v1::LowerResponse> lowered = sync_result.get_future().get();
  caller.join();
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_TRUE(async_result.get_future().get().ok());
  EXPECT_EQ(client->attempts(), 2);  // calls; gRPC made the retries
}

TEST(ServiceTest, ClientGivesUpWhenRetriesRunOut) {
  RefusingServer refusing(grpc::StatusCode::UNAVAILABLE);
  auto client = Connect(refusing.address, [](ClientOptions& options) {
    options.retry.max_attempts = 3;
    options.retry.initial_backoff = milliseconds(10);
  });
  absl::StatusOr<v1::LowerResponse> response = client->Lower(TinyRequest());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(refusing.service.attempts.load(), 3);
  EXPECT_EQ(client->attempts(), 1);
}

TEST(ServiceTest, DefaultRetryPolicyIsTheServiceConfig) {
  // client/service_config.json: 4 attempts on UNAVAILABLE.
  RefusingServer refusing(grpc::StatusCode::UNAVAILABLE);
  auto client = Connect(refusing.address, [](ClientOptions& options) {
    options.retry = RetryOptions{};  // nothing replaced
  });
  EXPECT_EQ(client->Lower(TinyRequest()).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(refusing.service.attempts.load(), 4);
}

TEST(ServiceTest, RetriesFollowTheServersPushback) {
  // RESOURCE_EXHAUSTED is retried when the server says when (ferryd: the
  // RetryInfo delay), never when it says -1 (a limit).
  {
    RefusingServer refusing(grpc::StatusCode::RESOURCE_EXHAUSTED, "10");
    auto client = Connect(refusing.address);
    EXPECT_EQ(client->Lower(TinyRequest()).status().code(),
              absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(refusing.service.attempts.load(), 4);
  }
  {
    RefusingServer refusing(grpc::StatusCode::RESOURCE_EXHAUSTED, "-1");
    auto client = Connect(refusing.address);
    EXPECT_EQ(client->Lower(TinyRequest()).status().code(),
              absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(refusing.service.attempts.load(), 1);
  }
}

TEST(ServiceTest, RetryOptionsOutOfRangeAreRefused) {
  for (auto tweak : std::vector<std::function<void(RetryOptions&)>>{
           [](RetryOptions& r) { r.max_attempts = 0; },
           [](RetryOptions& r) { r.max_attempts = 6; },
           [](RetryOptions& r) { r.initial_backoff = milliseconds(0); },
           [](RetryOptions& r) { r.multiplier = 0.5; }}) {
    ClientOptions options;
    options.target = "127.0.0.1:1";
    tweak(options.retry);
    EXPECT_EQ(Client::Create(options).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(ServiceTest, MetricsEndpointServesPrometheusText) {
  ServerConfig config = LoopbackConfig();
  config.metrics_listen = "127.0.0.1:0";
  auto server = StartServer(config);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  ASSERT_TRUE(client->Lower(TinyRequest()).ok());
  v1::VerifyRequest verify;
  *verify.mutable_request() = TinyRequest();
  verify.set_device(v1::VERIFY_DEVICE_SIM);
  ASSERT_TRUE(client->Verify(verify).ok());
  ASSERT_EQ(
      client->Lower(BroadcastConstantRequest(100000, "w")).status().code(),
      absl::StatusCode::kResourceExhausted);

  std::string host = "127.0.0.1";
  int port = std::stoi(server->metrics_address().substr(host.size() + 1));
  httplib::Client http(host, port);
  httplib::Result scraped = http.Get("/metrics");
  ASSERT_TRUE(scraped);
  EXPECT_EQ(scraped->status, 200);
  const std::string& text = scraped->body;
  Exposition metrics(text);
  EXPECT_TRUE(metrics.well_formed()) << text;
  for (const auto& [series, value] :
       std::vector<std::pair<std::string, double>>{
           {"ferry_requests_total{method=\"Lower\",code=\"OK\"}", 1},
           {"ferry_requests_total{method=\"Lower\",code=\"RESOURCE_"
            "EXHAUSTED\"}",
            1},
           {"ferry_requests_total{method=\"Verify\",code=\"OK\"}", 1},
           {"ferry_request_duration_seconds_bucket{method=\"Lower\",le=\"+"
            "Inf\"}",
            2},
           {"ferry_queue_depth", 0},
           {"ferry_verifications_total{device=\"sim\",result=\"match\"}", 1}}) {
    EXPECT_EQ(metrics.Value(series), value) << series << "\n" << text;
  }
  EXPECT_TRUE(
      metrics.Value("ferry_pass_duration_seconds_count{pass=\"partition\"}"));
  EXPECT_TRUE(metrics.Value("ferry_cache_lookups_total{result=\"miss\"}"));
  EXPECT_EQ(metrics.Type("ferry_request_duration_seconds"), "histogram");
}

TEST(ServiceTest, EveryRequestWritesOneStructuredLogLine) {
  LogCapture log;
  ServerHooks hooks;
  hooks.log_sink = log.Sink();
  auto server = StartServer(LoopbackConfig(), hooks);
  ASSERT_NE(server, nullptr);
  auto client = Connect(server->address());
  CallOptions call;
  call.request_id = "build-42";
  absl::StatusOr<v1::LowerResponse> lowered =
      client->Lower(TinyRequest(), call);
  ASSERT_TRUE(lowered.ok());
  EXPECT_EQ(lowered->request_id(), "build-42");
  ASSERT_FALSE(client->Lower(BroadcastConstantRequest(100000, "w")).ok());
  ASSERT_TRUE(client->GetCapabilities().ok());

  std::vector<std::string> lines = log.RpcLines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find("\"request_id\":\"build-42\""), std::string::npos);
  EXPECT_NE(lines[0].find("\"method\":\"Lower\""), std::string::npos);
  EXPECT_NE(lines[0].find("\"code\":\"OK\""), std::string::npos);
  EXPECT_NE(lines[0].find("\"outcome\":\"lowered\""), std::string::npos);
  EXPECT_NE(lines[0].find("\"duration_ms\":"), std::string::npos);
  EXPECT_NE(lines[1].find("\"code\":\"RESOURCE_EXHAUSTED\""),
            std::string::npos);
  EXPECT_NE(lines[2].find("\"method\":\"GetCapabilities\""), std::string::npos);
  for (const std::string& line : lines) {
    EXPECT_EQ(line.front(), '{');
    EXPECT_EQ(line.back(), '}');
  }
}

}  // namespace
}  // namespace ferry::testing
