// The operator tables agree: the registry (passes/), the host kernels
// (runtime/host_kernels.cc and runtime/ops/), and the CUDA backend's
// declared table (runtime/ops/backend_ops.h). And host fallbacks inside
// device delegates are counted by verification, on sim as the cuda backend
// would make them.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "passes/report_io.h"
#include "passes/schema.h"
#include "runtime/host_kernels.h"
#include "runtime/ops/backend_ops.h"
#include "runtime/verify.h"
#include "runtime/verify_io.h"
#include "tests/runtime/test_util.h"

namespace ferry {
namespace {

bool IsCopyOp(std::string_view op) {
  return op == kH2DCopyOp || op == kD2HCopyOp;
}

// A view: every result aliases an argument and nothing is written.
bool IsView(const OpInfo& info) {
  if (!info.schema->WrittenArguments().empty()) return false;
  if (info.schema->returns.empty()) return false;
  for (int r = 0; r < static_cast<int>(info.schema->returns.size()); ++r)
    if (!info.schema->AliasedArgument(r).has_value()) return false;
  return true;
}

TEST(OpTablesTest, EveryRegistryOperatorHasAHostKernelOrIsAViewOrMetadata) {
  for (const std::string& op : RegisteredOps()) {
    const OpInfo* info = LookupOp(op);
    ASSERT_NE(info, nullptr) << op;
    if (info->metadata_only || IsCopyOp(op) || IsView(*info)) continue;
    EXPECT_NE(FindHostKernel(op), nullptr) << "no host kernel for " << op;
  }
}

// Host kernels beyond the registry: operators a program may still call with
// its own schema (the frontend sends ATen's with the node). Each is listed
// here so that a kernel for a misspelt name cannot pass unnoticed.
const std::set<std::string>& KernelsBeyondTheRegistry() {
  static const std::set<std::string>* const ops = [] {
    auto* s = new std::set<std::string>;
    for (const std::string& op : HostKernelOps())
      if (LookupOp(op) == nullptr) s->insert(op);
    return s;
  }();
  return *ops;
}

TEST(OpTablesTest, EveryHostKernelIsForAnOperatorWithAnATenSchemaName) {
  // Registry operators are checked above; the others must at least be
  // spelt as ATen spells them: "ns::name" or "ns::name.overload".
  for (const std::string& op : KernelsBeyondTheRegistry()) {
    EXPECT_TRUE(op.starts_with("aten::")) << op;
    EXPECT_EQ(op.find(".default"), std::string::npos) << op;
    EXPECT_LE(std::count(op.begin(), op.end(), '.'), 1) << op;
  }
  // The operators the network families added are registry operators.
  for (const char* op :
       {"aten::convolution", "aten::native_batch_norm",
        "aten::max_pool2d_with_indices", "aten::empty.memory_format",
        "aten::zeros", "aten::ones", "aten::arange", "aten::arange.start",
        "aten::arange.start_step", "aten::triu", "aten::masked_fill.Scalar",
        "aten::_unsafe_view", "aten::_reshape_alias", "aten::split.Tensor",
        "aten::embedding", "aten::_native_multi_head_attention"}) {
    EXPECT_NE(LookupOp(op), nullptr) << op << " is not in the registry";
    EXPECT_NE(FindHostKernel(op), nullptr) << op << " has no host kernel";
  }
}

TEST(OpTablesTest, CudaTableIsSortedUniqueAndNamesRegistryOperators) {
  std::span<const BackendOp> table = CudaBackendTable();
  ASSERT_FALSE(table.empty());
  for (size_t i = 1; i < table.size(); ++i)
    EXPECT_LT(table[i - 1].op, table[i].op) << "not sorted or repeated";
  for (const BackendOp& entry : table) {
    const std::string op(entry.op);
    EXPECT_NE(entry.support, BackendSupport::kUnsupported) << op;
    const OpInfo* info = LookupOp(op);
    // A registry operator, or a host kernel (with ATen's schema).
    EXPECT_TRUE(info != nullptr || KernelsBeyondTheRegistry().count(op))
        << op << " is neither a registry operator nor a host kernel";
    // Every operator runs on the host too (host-only marks, the reference
    // run, and calls a device kernel cannot take), unless it is a view.
    if (info == nullptr || !IsView(*info)) {
      EXPECT_NE(FindHostKernel(op), nullptr) << op << " has no host kernel";
    }
    EXPECT_EQ(CudaBackendSupport(op), entry.support) << op;
    EXPECT_EQ(CudaBackendSupport(op + ".default"), entry.support) << op;
  }
  EXPECT_EQ(CudaBackendSupport("aten::no_such_op"),
            BackendSupport::kUnsupported);
}

TEST(OpTablesTest, AdvertisedListsFollowTheTable) {
  const std::vector<std::string> all = CudaBackendOperators();
  const std::vector<std::string> host_only = CudaHostOnlyOperators();
  EXPECT_EQ(all.size(), CudaBackendTable().size());
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  for (const std::string& op : host_only) {
    EXPECT_TRUE(std::binary_search(all.begin(), all.end(), op)) << op;
    EXPECT_EQ(CudaBackendSupport(op), BackendSupport::kHostOnly) << op;
  }
  // The network operators the models need are declared, with kernels on
  // the device for the CNN ones.
  for (const char* op :
       {"aten::convolution", "aten::native_batch_norm",
        "aten::max_pool2d_with_indices", "aten::relu_", "aten::add_.Tensor",
        "aten::addmm", "aten::mean.dim", "aten::empty.memory_format",
        "aten::hardtanh_", "aten::embedding", "aten::native_layer_norm",
        "aten::gelu", "aten::_softmax"})
    EXPECT_EQ(CudaBackendSupport(op), BackendSupport::kDevice) << op;
  EXPECT_EQ(CudaBackendSupport("aten::_native_multi_head_attention"),
            BackendSupport::kHostOnly);
  EXPECT_EQ(CudaBackendSupport("aten::triu"), BackendSupport::kHostOnly);
}

TEST(OpTablesTest, FallbackScopeCountsInnermost) {
  RecordHostFallback("aten::triu");  // no scope: nothing to count into
  HostFallbackScope outer;
  RecordHostFallback("aten::triu.default");
  {
    HostFallbackScope inner;
    RecordHostFallback("aten::triu");
    RecordHostFallback("aten::triu");
    EXPECT_EQ(inner.counts().at("aten::triu"), 2);
  }
  EXPECT_EQ(outer.counts().at("aten::triu"), 1);
}

// relu(triu(sin(x))) with sin and triu in one delegate on cuda:0: triu is
// host-only on the cuda backend, so verification on sim counts it.
constexpr char kOriginal[] = R"pb(
  methods {
    name: "forward"
    nodes {
      name: "x"
      input { kind: USER_INPUT }
      tensor {
        dtype: F32
        sizes: [ 4, 4 ]
      }
    }
    nodes {
      name: "d0"
      delegate {
        module: "m0"
        args { value: "x" }
      }
      tensor {
        dtype: F32
        sizes: [ 4, 4 ]
      }
    }
    nodes {
      name: "r"
      call {
        op: "aten::relu"
        args { value: "d0" }
      }
      tensor {
        dtype: F32
        sizes: [ 4, 4 ]
      }
    }
    nodes {
      name: "output"
      output { values { value: "r" } }
    }
  }
)pb";

constexpr char kLowered[] = R"pb(
  methods {
    name: "forward"
    nodes {
      name: "x"
      input { kind: USER_INPUT }
      tensor {
        dtype: F32
        sizes: [ 4, 4 ]
        memory { arena: 0 offset: 0 size: 64 planned: true }
      }
    }
    nodes {
      name: "x_h2d"
      call {
        op: "et_copy::_h2d_copy"
        args { value: "x" }
      }
      tensor {
        dtype: F32
        sizes: [ 4, 4 ]
        device { type: "cuda" index: 0 }
        memory { arena: 1 offset: 0 size: 64 planned: true }
      }
    }
    nodes {
      name: "d0"
      delegate {
        module: "m0"
        args { value: "x_h2d" }
      }
      tensor {
        dtype: F32
        sizes: [ 4, 4 ]
        device { type: "cuda" index: 0 }
        memory { arena: 1 offset: 64 size: 64 planned: true }
      }
    }
    nodes {
      name: "d0_host"
      call {
        op: "et_copy::_d2h_copy"
        args { value: "d0" }
      }
      tensor {
        dtype: F32
        sizes: [ 4, 4 ]
        memory { arena: 0 offset: 64 size: 64 planned: true }
      }
    }
    nodes {
      name: "r"
      call {
        op: "aten::relu"
        args { value: "d0_host" }
      }
      tensor {
        dtype: F32
        sizes: [ 4, 4 ]
        memory { arena: 0 offset: 128 size: 64 planned: true }
      }
    }
    nodes {
      name: "output"
      output { values { value: "r" } }
    }
    arenas {
      device { type: "cpu" }
      size: 192
    }
    arenas {
      device { type: "cuda" }
      size: 128
    }
  }
)pb";

constexpr char kModule[] = R"pb(
  modules {
    id: "m0"
    backend: "FerryCudaBackend"
    compile_specs { key: "target_device" value: "cuda:0" }
    graph {
      name: "m0"
      nodes {
        name: "x0"
        input { kind: USER_INPUT }
        tensor {
          dtype: F32
          sizes: [ 4, 4 ]
        }
      }
      nodes {
        name: "y"
        call {
          op: "aten::sin"
          args { value: "x0" }
        }
        tensor {
          dtype: F32
          sizes: [ 4, 4 ]
        }
      }
      nodes {
        name: "z"
        call {
          op: "aten::triu"
          args { value: "y" }
        }
        tensor {
          dtype: F32
          sizes: [ 4, 4 ]
        }
      }
      nodes {
        name: "out"
        output { values { value: "z" } }
      }
    }
    input_layouts {
      dtype: F32
      sizes: [ 4, 4 ]
    }
    returns_tuple: false
  }
)pb";

TEST(OpTablesTest, VerifyOnSimCountsHostOnlyOperatorsInDelegates) {
  Program original = testing::ParseProgram(std::string(kOriginal) + kModule);
  Program lowered = testing::ParseProgram(std::string(kLowered) + kModule);
  VerifyOptions options;
  options.device = VerifyDevice::kSim;
  absl::StatusOr<VerifyReport> report =
      VerifyPrograms(original, lowered, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok) << report->Summary();
  ASSERT_EQ(report->host_fallbacks.size(), 1u) << report->Summary();
  EXPECT_EQ(report->host_fallbacks[0].op, "aten::triu");
  EXPECT_EQ(report->host_fallbacks[0].count, 1);
  EXPECT_NE(report->Summary().find("host fallbacks: aten::triu x1"),
            std::string::npos)
      << report->Summary();
  const std::string json = ReportJson(VerifyReportToProto(*report));
  EXPECT_NE(json.find(R"("host_fallbacks":[{"op":"aten::triu","count":"1"}])"),
            std::string::npos)
      << json;
}

TEST(OpTablesTest, VerifyOnSimCountsNothingForDeviceKernels) {
  // The same delegate with clone (a device kernel) instead of triu.
  std::string module = kModule;
  const std::string triu = "aten::triu";
  module.replace(module.find(triu), triu.size(), "aten::clone");
  Program original = testing::ParseProgram(std::string(kOriginal) + module);
  Program lowered = testing::ParseProgram(std::string(kLowered) + module);
  VerifyOptions options;
  options.device = VerifyDevice::kSim;
  absl::StatusOr<VerifyReport> report =
      VerifyPrograms(original, lowered, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok) << report->Summary();
  EXPECT_TRUE(report->host_fallbacks.empty()) << report->Summary();
  EXPECT_EQ(report->Summary().find("host fallbacks"), std::string::npos);
}

}  // namespace
}  // namespace ferry
