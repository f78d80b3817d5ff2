// The executor: views and in-place writes over shared storage, metadata
// operators, tuples, program data, memory plans and strictness.
#include "runtime/executor.h"

#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "tests/runtime/test_util.h"

namespace ferry::testing {
namespace {

absl::StatusOr<std::vector<HostTensor>> RunOnce(
    const Program& program, ExecutionMode mode,
    const std::vector<HostTensor>& inputs,
    std::string_view method = "forward") {
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      Executor::Load(program, mode);
  if (!executor.ok()) return executor.status();
  return (*executor)->Run(method, inputs);
}

const std::vector<double> kX = {0, 1, 2, 3, 4, 5};  // x: f32[2,3]

// A program: x = f32[2,3]; v = <view call>; c = clone(v); return c.
std::string ViewProgram(absl::string_view view_call,
                        absl::string_view view_spec,
                        absl::string_view clone_sizes) {
  return absl::StrCat(
      "methods { name: \"forward\"\n"
      "  nodes { name: \"x\" input { kind: USER_INPUT } tensor { dtype: F32 "
      "sizes: [2, 3] } }\n"
      "  nodes { name: \"v\" call { ",
      view_call, " } tensor { dtype: F32 ", view_spec, " } }\n",
      "  nodes { name: \"c\" call { op: \"aten::clone\" args { value: \"v\" } "
      "} tensor { dtype: F32 "
      "sizes: ",
      clone_sizes,
      " } }\n"
      "  nodes { name: \"output\" output { values { value: \"c\" } } }\n}\n");
}

struct ViewCase {
  const char* name;
  const char* call;
  const char* spec;
  const char* sizes;
  std::vector<double> expected;
};

// Each view reads x's storage through the node's own spec; clone copies the
// values out.
TEST(ExecutorTest, ViewOperatorsReadTheirRootsStorage) {
  const ViewCase cases[] = {
      {"view",
       "op: \"aten::view\" args { value: \"x\" } args { ints { values: [3, 2] "
       "} }",
       "sizes: [3, 2]", "[3, 2]", kX},
      {"reshape",
       "op: \"aten::reshape\" args { value: \"x\" } args { ints { values: [6] "
       "} }",
       "sizes: [6]", "[6]", kX},
      {"transpose",
       "op: \"aten::transpose.int\" args { value: \"x\" } args { int_value: 0 "
       "} args { int_value: 1 }",
       "sizes: [3, 2] strides: [1, 3]",
       "[3, 2]",
       {0, 3, 1, 4, 2, 5}},
      {"permute",
       "op: \"aten::permute\" args { value: \"x\" } args { ints { values: [1, "
       "0] } }",
       "sizes: [3, 2] strides: [1, 3]",
       "[3, 2]",
       {0, 3, 1, 4, 2, 5}},
      {"t",
       "op: \"aten::t\" args { value: \"x\" }",
       "sizes: [3, 2] strides: [1, 3]",
       "[3, 2]",
       {0, 3, 1, 4, 2, 5}},
      {"expand",
       "op: \"aten::expand\" args { value: \"x\" } args { ints { values: [2, "
       "2, 3] } }",
       "sizes: [2, 2, 3] strides: [0, 3, 1]",
       "[2, 2, 3]",
       {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}},
      {"slice",
       "op: \"aten::slice.Tensor\" args { value: \"x\" } args { int_value: 1 } "
       "args { int_value: 1 } "
       "args { int_value: 3 }",
       "sizes: [2, 2] strides: [3, 1] storage_offset: 1",
       "[2, 2]",
       {1, 2, 4, 5}},
      {"select",
       "op: \"aten::select.int\" args { value: \"x\" } args { int_value: 0 } "
       "args { int_value: 1 }",
       "sizes: [3] storage_offset: 3",
       "[3]",
       {3, 4, 5}},
      {"unsqueeze",
       "op: \"aten::unsqueeze\" args { value: \"x\" } args { int_value: 0 }",
       "sizes: [1, 2, 3] strides: [6, 3, 1]", "[1, 2, 3]", kX},
      {"alias", "op: \"aten::alias\" args { value: \"x\" }", "sizes: [2, 3]",
       "[2, 3]", kX},
  };
  for (const ViewCase& c : cases) {
    SCOPED_TRACE(c.name);
    Program program = ParseProgram(ViewProgram(c.call, c.spec, c.sizes));
    for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kSim}) {
      absl::StatusOr<std::vector<HostTensor>> out =
          RunOnce(program, mode, {Dense(DType::kF32, {2, 3}, kX)});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(Values((*out)[0]), c.expected) << ExecutionModeName(mode);
    }
  }
}

TEST(ExecutorTest, SqueezeViewsOfAnUnsqueezedView) {
  for (const char* squeeze :
       {"op: \"aten::squeeze.dim\" args { value: \"u\" } args { int_value: 1 }",
        "op: \"aten::squeeze\" args { value: \"u\" }"}) {
    std::string text = absl::StrCat(
        "methods { name: \"forward\"\n"
        "  nodes { name: \"x\" input { kind: USER_INPUT } tensor { dtype: F32 "
        "sizes: [2, 3] } }\n"
        "  nodes { name: \"u\" call { op: \"aten::unsqueeze\" args { value: "
        "\"x\" } args { int_value: 1 } }"
        " tensor { dtype: F32 sizes: [2, 1, 3] strides: [3, 3, 1] } }\n"
        "  nodes { name: \"s\" call { ",
        squeeze,
        " } tensor { dtype: F32 sizes: [2, 3] } }\n"
        "  nodes { name: \"c\" call { op: \"aten::clone\" args { value: \"s\" "
        "} } tensor { dtype: F32 sizes: [2, 3] } }\n"
        "  nodes { name: \"output\" output { values { value: \"c\" } } }\n}\n");
    Program program = ParseProgram(text);
    absl::StatusOr<std::vector<HostTensor>> out = RunOnce(
        program, ExecutionMode::kEager, {Dense(DType::kF32, {2, 3}, kX)});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values((*out)[0]), kX);
  }
}

TEST(ExecutorTest, InPlaceWriteThroughAViewChangesTheRoot) {
  // v = view(x, [6]); relu_(v); return clone(x): the write lands in x.
  Program program = ParseProgram(R"pb(
    methods {
      name: "forward"
      nodes {
        name: "x"
        input { kind: USER_INPUT }
        tensor {
          dtype: F32
          sizes: [ 2, 3 ]
        }
      }
      nodes {
        name: "v"
        call {
          op: "aten::view"
          args { value: "x" }
          args { ints { values: [ 6 ] } }
        }
        tensor {
          dtype: F32
          sizes: [ 6 ]
        }
      }
      nodes {
        name: "r"
        call {
          op: "aten::relu_"
          args { value: "v" }
        }
        tensor {
          dtype: F32
          sizes: [ 6 ]
        }
      }
      nodes {
        name: "c"
        call {
          op: "aten::clone"
          args { value: "x" }
        }
        tensor {
          dtype: F32
          sizes: [ 2, 3 ]
        }
      }
      nodes {
        name: "output"
        output {
          values { value: "c" }
          values { value: "r" }
        }
      }
    }
  )pb");
  for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kSim}) {
    absl::StatusOr<std::vector<HostTensor>> out = RunOnce(
        program, mode, {Dense(DType::kF32, {2, 3}, {-1, 2, -3, 4, -5, 6})});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values((*out)[0]), (std::vector<double>{0, 2, 0, 4, 0, 6}));
    EXPECT_EQ(Values((*out)[1]), (std::vector<double>{0, 2, 0, 4, 0, 6}));
  }
}

TEST(ExecutorTest, MetadataOperatorsReadSpecsOnly) {
  Program program = ParseProgram(R"pb(
    methods {
      name: "forward"
      nodes {
        name: "x"
        input { kind: USER_INPUT }
        tensor {
          dtype: F32
          sizes: [ 2, 3 ]
          strides: [ 1, 2 ]
        }
      }
      nodes {
        name: "n"
        call {
          op: "aten::sym_size.int"
          args { value: "x" }
          args { int_value: -1 }
        }
        scalar: SCALAR_INT
      }
      nodes {
        name: "m"
        call {
          op: "aten::sym_numel"
          args { value: "x" }
        }
        scalar: SCALAR_INT
      }
      nodes {
        name: "s"
        call {
          op: "aten::sym_stride.int"
          args { value: "x" }
          args { int_value: 1 }
        }
        scalar: SCALAR_INT
      }
      nodes {
        name: "c"
        call {
          op: "aten::clone"
          args { value: "x" }
        }
        tensor {
          dtype: F32
          sizes: [ 2, 3 ]
        }
      }
      nodes {
        name: "output"
        output {
          values { value: "n" }
          values { value: "m" }
          values { value: "s" }
          values { value: "c" }
        }
      }
    }
  )pb");
  absl::StatusOr<std::vector<HostTensor>> out =
      RunOnce(program, ExecutionMode::kEager, {Dense(DType::kF32, {2, 3}, kX)});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 4u);
  EXPECT_EQ((*out)[0].dtype, DType::kI64);
  EXPECT_TRUE((*out)[0].sizes.empty());
  EXPECT_EQ(Values((*out)[0]), std::vector<double>{3});
  EXPECT_EQ(Values((*out)[1]), std::vector<double>{6});
  EXPECT_EQ(Values((*out)[2]), std::vector<double>{2});
  // The strided input receives the caller's logical values.
  EXPECT_EQ(Values((*out)[3]), kX);
}

TEST(ExecutorTest, TupleResultsAreReadThroughGetItem) {
  Program program = ParseProgram(R"pb(
    methods {
      name: "forward"
      nodes {
        name: "x"
        input { kind: USER_INPUT }
        tensor {
          dtype: F64
          sizes: [ 1, 4 ]
        }
      }
      nodes {
        name: "ln"
        call {
          op: "aten::native_layer_norm"
          args { value: "x" }
          args { ints { values: [ 4 ] } }
          args { none {} }
          args { none {} }
          args { float_value: 0 }
        }
        tuple {
          elements {
            dtype: F64
            sizes: [ 1, 4 ]
          }
          elements {
            dtype: F64
            sizes: [ 1, 1 ]
          }
          elements {
            dtype: F64
            sizes: [ 1, 1 ]
          }
        }
      }
      nodes {
        name: "y"
        getitem { source: "ln" index: 0 }
        tensor {
          dtype: F64
          sizes: [ 1, 4 ]
        }
      }
      nodes {
        name: "mean"
        getitem { source: "ln" index: 1 }
        tensor {
          dtype: F64
          sizes: [ 1, 1 ]
        }
      }
      nodes {
        name: "output"
        output {
          values { value: "y" }
          values { value: "mean" }
          values { element { node: "ln" index: 2 } }
        }
      }
    }
  )pb");
  absl::StatusOr<std::vector<HostTensor>> out = RunOnce(
      program, ExecutionMode::kSim, {Dense(DType::kF64, {1, 4}, {1, 1, 3, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{-1, -1, 1, 1}));
  EXPECT_EQ(Values((*out)[1]), std::vector<double>{2});
  EXPECT_EQ(Values((*out)[2]), std::vector<double>{1});
}

constexpr char kParameterProgram[] = R"pb(
  methods {
    name: "forward"
    nodes {
      name: "w"
      input { kind: PARAMETER target: "w" }
      tensor {
        dtype: F32
        sizes: [ 2, 3 ] STRIDES
      }
    }
    nodes {
      name: "c"
      call {
        op: "aten::clone"
        args { value: "w" }
      }
      tensor {
        dtype: F32
        sizes: [ 2, 3 ]
      }
    }
    nodes {
      name: "output"
      output { values { value: "c" } }
    }
  }
  constants {
    name: "w"
    spec {
      dtype: F32
      sizes: [ 2, 3 ] STRIDES
    } DATA
  }
)pb";

std::string ParameterProgram(absl::string_view strides,
                             absl::string_view data) {
  return absl::StrReplaceAll(kParameterProgram,
                             {{"STRIDES", strides}, {"DATA", data}});
}

TEST(ExecutorTest, GeneratedConstantsFollowTheLogicalIndex) {
  // The same seed stored contiguous and transposed gives the same values.
  Program contiguous = ParseProgram(ParameterProgram("", "seed: 42"));
  Program transposed =
      ParseProgram(ParameterProgram("strides: [1, 2]", "seed: 42"));
  absl::StatusOr<std::vector<HostTensor>> a =
      RunOnce(contiguous, ExecutionMode::kEager, {});
  absl::StatusOr<std::vector<HostTensor>> b =
      RunOnce(transposed, ExecutionMode::kSim, {});
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(Values((*a)[0]), Values((*b)[0]));
  for (double v : Values((*a)[0])) {
    EXPECT_GE(v, -1);
    EXPECT_LT(v, 1);
  }
  Program other_seed = ParseProgram(ParameterProgram("", "seed: 43"));
  absl::StatusOr<std::vector<HostTensor>> c =
      RunOnce(other_seed, ExecutionMode::kEager, {});
  ASSERT_TRUE(c.ok());
  EXPECT_NE(Values((*a)[0]), Values((*c)[0]));
}

TEST(ExecutorTest, ConstantDataIsReadWithItsLayout) {
  // Transposed storage of [[1,2,3],[4,5,6]]: bytes in order 1,4,2,5,3,6.
  std::string data = "data: \"";
  for (float f : {1.f, 4.f, 2.f, 5.f, 3.f, 6.f}) {
    unsigned char bytes[4];
    std::memcpy(bytes, &f, 4);
    for (unsigned char b : bytes)
      absl::StrAppend(&data, "\\", absl::Dec(b / 64), absl::Dec(b / 8 % 8),
                      absl::Dec(b % 8));
  }
  data += "\"";
  Program program = ParseProgram(ParameterProgram("strides: [1, 2]", data));
  absl::StatusOr<std::vector<HostTensor>> out =
      RunOnce(program, ExecutionMode::kSim, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

// Validation refuses such a plan (FERRY-E0208); the runtime, which can be
// handed programs directly, refuses it too.
TEST(ExecutorTest, PlannedValueOutsideItsArenaIsAnErrorNamingTheNode) {
  Diagnostics validation;
  Program program = ParseProgramUnvalidated(
      R"pb(
        methods {
          name: "forward"
          nodes {
            name: "x"
            input { kind: USER_INPUT }
            tensor {
              dtype: F32
              sizes: [ 4 ]
              memory { size: 16 planned: true }
            }
          }
          nodes {
            name: "y"
            call {
              op: "aten::relu"
              args { value: "x" }
            }
            tensor {
              dtype: F32
              sizes: [ 4 ]
              memory { offset: 16 size: 16 planned: true }
            }
          }
          nodes {
            name: "output"
            output { values { value: "y" } }
          }
          arenas {
            device { type: "cpu" }
            size: 24
          }
        }
      )pb",
      &validation);
  ASSERT_EQ(validation.items().size(), 1u)
      << FormatDiagnosticsText(validation, "test");
  EXPECT_EQ(validation.items()[0].code, "FERRY-E0208");
  EXPECT_EQ(validation.items()[0].nodes, std::vector<std::string>{"y"});
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      Executor::Load(program, ExecutionMode::kSim);
  ASSERT_FALSE(executor.ok());
  EXPECT_EQ(executor.status().message(),
            "method 'forward': node 'y': planned at offset 16 size 16 of arena "
            "0 (24 bytes), but "
            "its storage spans 16 bytes");
  // The eager oracle ignores memory plans.
  EXPECT_TRUE(Executor::Load(program, ExecutionMode::kEager).ok());
}

TEST(ExecutorTest, HostOperatorGivenDeviceMemoryIsAnErrorNamingTheNode) {
  // x is a cuda:0 input (skip_h2d) that a host relu reads directly.
  Program program = ParseProgram(R"pb(
    methods {
      name: "forward"
      nodes {
        name: "x"
        input { kind: USER_INPUT }
        tensor {
          dtype: F32
          sizes: [ 4 ]
          device { type: "cuda" }
          memory { arena: 1 size: 16 planned: true }
        }
      }
      nodes {
        name: "r"
        call {
          op: "aten::relu"
          args { value: "x" }
        }
        tensor {
          dtype: F32
          sizes: [ 4 ]
          memory { size: 16 planned: true }
        }
      }
      nodes {
        name: "output"
        output { values { value: "r" } }
      }
      arenas {
        device { type: "cpu" }
        size: 16
      }
      arenas {
        device { type: "cuda" }
        size: 16
      }
    }
  )pb");
  absl::StatusOr<std::vector<HostTensor>> out = RunOnce(
      program, ExecutionMode::kSim, {Dense(DType::kF32, {4}, {1, 2, 3, 4})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(out.status().message(),
            "method 'forward': node 'r': host operator aten::relu given memory "
            "on sim cuda:0 "
            "(argument 'self', value 'x')");
  // The eager oracle puts everything on the host.
  EXPECT_TRUE(RunOnce(program, ExecutionMode::kEager,
                      {Dense(DType::kF32, {4}, {1, 2, 3, 4})})
                  .ok());
}

TEST(ExecutorTest, DeviceResidentOutputsAreReadBack) {
  // Under skip_d2h an output may stay on the device: the runtime copies it
  // back for the caller.
  Program program = ParseProgram(R"pb(
    methods {
      name: "forward"
      nodes {
        name: "x"
        input { kind: USER_INPUT }
        tensor {
          dtype: I32
          sizes: [ 3 ]
          memory { size: 12 planned: true }
        }
      }
      nodes {
        name: "x_h2d"
        call {
          op: "et_copy::_h2d_copy"
          args { value: "x" }
        }
        tensor {
          dtype: I32
          sizes: [ 3 ]
          device { type: "cuda" index: 1 }
          memory { arena: 1 size: 12 planned: true }
        }
      }
      nodes {
        name: "output"
        output { values { value: "x_h2d" } }
      }
      arenas {
        device { type: "cpu" }
        size: 12
      }
      arenas {
        device { type: "cuda" index: 1 }
        size: 12
      }
    }
  )pb");
  absl::StatusOr<std::vector<HostTensor>> out = RunOnce(
      program, ExecutionMode::kSim, {Dense(DType::kI32, {3}, {7, -8, 9})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{7, -8, 9}));
}

TEST(ExecutorTest, InputsAreCheckedAndCancellationStops) {
  Program program = ParseProgram(ViewProgram(
      "op: \"aten::view\" args { value: \"x\" } args { ints { values: [6] } }",
      "sizes: [6]", "[6]"));
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      Executor::Load(program, ExecutionMode::kSim);
  ASSERT_TRUE(executor.ok());
  absl::StatusOr<std::vector<HostTensor>> wrong = (*executor)->Run(
      "forward", std::vector<HostTensor>{Dense(DType::kF32, {3, 2}, kX)});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      (*executor)->Run("forward", std::vector<HostTensor>{}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      (*executor)->Run("backward", std::vector<HostTensor>{}).status().code(),
      absl::StatusCode::kNotFound);
  absl::StatusOr<std::vector<HostTensor>> cancelled = (*executor)->Run(
      "forward", std::vector<HostTensor>{Dense(DType::kF32, {2, 3}, kX)},
      [] { return false; });
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
  // Running twice gives the same result.
  auto first = (*executor)->Run(
      "forward", std::vector<HostTensor>{Dense(DType::kF32, {2, 3}, kX)});
  auto second = (*executor)->Run(
      "forward", std::vector<HostTensor>{Dense(DType::kF32, {2, 3}, kX)});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(Values((*first)[0]), Values((*second)[0]));
}

TEST(ExecutorTest, GeneratedUserInputsDependOnSeedMethodAndPosition) {
  Program program = ParseProgram(R"pb(
    methods {
      name: "forward"
      nodes {
        name: "a"
        input { kind: USER_INPUT }
        tensor {
          dtype: F32
          sizes: [ 8 ]
        }
      }
      nodes {
        name: "b"
        input { kind: USER_INPUT }
        tensor {
          dtype: F32
          sizes: [ 8 ]
        }
      }
      nodes {
        name: "output"
        output {
          values { value: "a" }
          values { value: "b" }
        }
      }
    }
  )pb");
  std::vector<HostTensor> s0 = GenerateUserInputs(program.methods[0], 0);
  std::vector<HostTensor> s0_again = GenerateUserInputs(program.methods[0], 0);
  std::vector<HostTensor> s1 = GenerateUserInputs(program.methods[0], 1);
  ASSERT_EQ(s0.size(), 2u);
  EXPECT_EQ(s0[0].data, s0_again[0].data);
  EXPECT_NE(s0[0].data, s0[1].data);
  EXPECT_NE(s0[0].data, s1[0].data);
}

// Modules m0 .. m<depth-1>, each calling the next from `calls` (1 or 2)
// delegates (summed), the last computing relu; `cycle`: the last calls m0
// instead. The method calls m0 once. Every value is f32[4] on the host.
std::string NestedModules(int depth, int calls = 1, bool cycle = false) {
  auto input = [](const std::string& name) {
    return absl::StrCat("nodes { name: '", name,
                        "' input { kind: USER_INPUT } tensor { dtype: F32 "
                        "sizes: [4] } } ");
  };
  auto delegate = [](const std::string& name, const std::string& module) {
    return absl::StrCat("nodes { name: '", name, "' delegate { module: '",
                        module,
                        "' args { value: 'a' } } tensor { dtype: F32 sizes: "
                        "[4] } } ");
  };
  std::string text;
  for (int k = 0; k < depth; ++k) {
    const bool last = k == depth - 1;
    const std::string callee =
        last ? (cycle ? "m0" : "") : absl::StrCat("m", k + 1);
    std::string body = input("a");
    if (callee.empty()) {
      body +=
          "nodes { name: 'r' call { op: 'aten::relu' args { value: 'a' } "
          "} tensor { dtype: F32 sizes: [4] } } ";
    } else {
      body += delegate("r", callee);
      for (int c = 1; c < calls; ++c) {
        const std::string name = absl::StrCat("r", c);
        body += delegate(name, callee);
        body += absl::StrCat(
            "nodes { name: 's", c,
            "' call { op: 'aten::add.Tensor' args { value: 'r' } args { "
            "value: '",
            name, "' } } tensor { dtype: F32 sizes: [4] } } ");
      }
    }
    const std::string result = calls > 1 && !callee.empty()
                                   ? absl::StrCat("s", calls - 1)
                                   : std::string("r");
    body += absl::StrCat("nodes { name: 'out' output { values { value: '",
                         result, "' } } } ");
    absl::StrAppend(&text, "modules { id: 'm", k,
                    "' backend: 'FerryHostBackend' graph { name: 'm", k, "' ",
                    body,
                    "} input_layouts { dtype: F32 sizes: [4] } "
                    "returns_tuple: false } ");
  }
  absl::StrAppend(&text, "methods { name: 'forward' ",
                  absl::StrReplaceAll(input("x"), {{"'a'", "'x'"}}),
                  "nodes { name: 'y' delegate { module: 'm0' args { value: "
                  "'x' } } tensor { dtype: F32 sizes: [4] } } "
                  "nodes { name: 'out' output { values { value: 'y' } } } }");
  return text;
}

bool HasCode(const Diagnostics& diagnostics, std::string_view code) {
  for (const Diagnostic& d : diagnostics.items())
    if (d.code == code) return true;
  return false;
}

// A lowered module calling itself, two calling each other, and a chain of
// 8,000 nested modules: validation refuses them (FERRY-E0406/E0407), and the
// runtime, handed them directly, answers with a status instead of
// recursing until the stack overflows.
TEST(ExecutorTest, RecursiveAndDeeplyNestedModulesAreRefusedWithAStatus) {
  struct Case {
    std::string name, text, code, message;
  };
  const std::vector<Case> cases = {
      {"self", NestedModules(1, 1, /*cycle=*/true), "FERRY-E0406",
       "module 'm0' calls itself (delegate 'r')"},
      {"two-cycle", NestedModules(2, 1, /*cycle=*/true), "FERRY-E0406",
       "lowered modules call each other in a cycle: 'm0' -> 'm1' -> 'm0'"},
      {"8000 deep", NestedModules(8000), "FERRY-E0407",
       "module 'm0' starts a chain of 8000 nested lowered modules"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Diagnostics validation;
    Program program = ParseProgramUnvalidated(c.text, &validation);
    EXPECT_TRUE(HasCode(validation, c.code))
        << FormatDiagnosticsText(validation, "test");
    for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kSim}) {
      absl::StatusOr<std::vector<HostTensor>> out =
          RunOnce(program, mode, {Dense(DType::kF32, {4}, {-1, 2, -3, 4})});
      ASSERT_FALSE(out.ok());
      EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(out.status().message().find(c.message), std::string::npos)
          << out.status();
    }
  }
}

// Nesting up to the bound runs (and validates); one level more does not.
TEST(ExecutorTest, ModulesNestUpToTheBound) {
  Diagnostics validation;
  Program program = ParseProgramUnvalidated(NestedModules(64), &validation);
  EXPECT_FALSE(validation.HasErrors())
      << FormatDiagnosticsText(validation, "test");
  absl::StatusOr<std::vector<HostTensor>> out = RunOnce(
      program, ExecutionMode::kSim, {Dense(DType::kF32, {4}, {-1, 2, -3, 4})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{0, 2, 0, 4}));

  Program deeper = ParseProgramUnvalidated(NestedModules(65), &validation);
  EXPECT_TRUE(HasCode(validation, "FERRY-E0407"));
  EXPECT_FALSE(RunOnce(deeper, ExecutionMode::kSim,
                       {Dense(DType::kF32, {4}, {-1, 2, -3, 4})})
                   .ok());
}

// Two calls per level double the instantiated graphs at every level: 40
// levels would be 2^40 module instances. Validation refuses the expansion
// (FERRY-E0408) and the runtime stops at its node bound with a status.
TEST(ExecutorTest, ExponentialModuleExpansionIsRefusedWithAStatus) {
  Diagnostics validation;
  Program program =
      ParseProgramUnvalidated(NestedModules(40, /*calls=*/2), &validation);
  EXPECT_TRUE(HasCode(validation, "FERRY-E0408"))
      << FormatDiagnosticsText(validation, "test");
  EXPECT_FALSE(HasCode(validation, "FERRY-E0407"));
  absl::StatusOr<std::vector<HostTensor>> out = RunOnce(
      program, ExecutionMode::kEager, {Dense(DType::kF32, {4}, {1, 2, 3, 4})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("instantiates more than 2000000 nodes"),
            std::string::npos)
      << out.status();
}

}  // namespace
}  // namespace ferry::testing
