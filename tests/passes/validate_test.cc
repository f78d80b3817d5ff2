// ValidateProgram: one case per diagnostic code it emits, asserting the code,
// the node named first and (for the important ones) the exact message;
// programs are written as text, imported, then validated.
#include "passes/validate.h"

#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ferry/v1/program.pb.h"
#include "passes/diagnostic_codes.h"
#include "passes/diagnostics.h"
#include "passes/ir.h"
#include "passes/proto_io.h"
#include "tests/support/programs.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Imported, not yet validated: each test validates (and checks) itself.
Program Import(const std::string& text) {
  return testing_util::ParseProgramUnvalidated(text);
}

Diagnostics Validate(const Program& program) {
  Diagnostics diagnostics;
  bool ok = ValidateProgram(program, diagnostics);
  EXPECT_EQ(ok, !diagnostics.HasErrors());
  return diagnostics;
}

Diagnostics ValidateText(const std::string& text) {
  return Validate(Import(text));
}

// The only diagnostic, which must be an error.
Diagnostic Only(const Diagnostics& diagnostics) {
  EXPECT_EQ(diagnostics.items().size(), 1u)
      << FormatDiagnosticsText(diagnostics, "test");
  if (diagnostics.items().empty()) return Diagnostic{};
  EXPECT_EQ(diagnostics.items()[0].severity, Severity::kError);
  return diagnostics.items()[0];
}

std::string FirstNode(const Diagnostic& diagnostic) {
  return diagnostic.nodes.empty() ? "" : diagnostic.nodes[0];
}

// A method "forward" whose body is `nodes` (text of Node messages).
std::string Forward(const std::string& nodes) {
  return "methods { name: 'forward' " + nodes + " }";
}

std::string Input(const std::string& name, const std::string& spec) {
  return "nodes { name: '" + name + "' input { kind: USER_INPUT } tensor { " +
         spec + " } }";
}

std::string Output(const std::string& value) {
  return "nodes { name: 'out' output { values { value: '" + value + "' } } }";
}

// A module "m" adding its two user inputs, returning a tuple of one.
std::string Module(const std::string& target_device, bool returns_tuple = true,
                   int layouts = 2) {
  std::string text = "modules { id: 'm' backend: 'FerryCudaBackend' ";
  if (!target_device.empty()) {
    text += "compile_specs { key: 'target_device' value: '" + target_device +
            "' } ";
  }
  text += "graph { name: 'm' " + Input("a", "dtype: F32 sizes: [4, 4]") +
          Input("b", "dtype: F32 sizes: [4, 4]") +
          "nodes { name: 's' call { op: 'aten::add.Tensor' args { value: 'a' }"
          " args { value: 'b' } } tensor { dtype: F32 sizes: [4, 4] } } " +
          Output("s") + " } ";
  for (int i = 0; i < layouts; ++i) {
    text += "input_layouts { dtype: F32 sizes: [4, 4] } ";
  }
  text += returns_tuple ? "returns_tuple: true }" : "returns_tuple: false }";
  return text;
}

const char kXY[] =
    "nodes { name: 'x' input { kind: USER_INPUT } tensor { dtype: F32 sizes: "
    "[4, 4] } } "
    "nodes { name: 'y' input { kind: USER_INPUT } tensor { dtype: F32 sizes: "
    "[4, 4] } } ";

std::string DelegateCall(const std::string& result) {
  return "nodes { name: 'd' delegate { module: 'm' args { value: 'x' } args { "
         "value: 'y' } } " +
         result + " } ";
}

const char kTupleResult[] = "tuple { elements { dtype: F32 sizes: [4, 4] } }";

std::string DelegateProgram(const std::string& target_device) {
  return Module(target_device) +
         Forward(std::string(kXY) + DelegateCall(kTupleResult) +
                 "nodes { name: 'g' getitem { source: 'd' index: 0 } tensor { "
                 "dtype: F32 sizes: [4, 4] } } " +
                 Output("g"));
}

// --- Clean programs
// ----------------------------------------------------------------

// A program using views, in-place ops, tuples, metadata ops, a custom op and
// a delegate, all declared correctly.
std::string CleanProgram() {
  return Module("cuda:0") + R"pb(
    constants {
      name: "w"
      spec {
        dtype: F32
        sizes: [ 4, 4 ]
        strides: [ 1, 4 ]
      }
      seed: 7
    }
    constants {
      name: "c"
      spec {
        dtype: I32
        sizes: [ 2 ]
      }
      data: "\001\000\000\000\002\000\000\000"
    }
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
        name: "y"
        input { kind: USER_INPUT }
        tensor {
          dtype: F32
          sizes: [ 4, 4 ]
        }
      }
      nodes {
        name: "w"
        input { kind: PARAMETER target: "w" }
        tensor {
          dtype: F32
          sizes: [ 4, 4 ]
          strides: [ 1, 4 ]
        }
      }
      nodes {
        name: "c"
        constant { name: "c" }
        tensor {
          dtype: I32
          sizes: [ 2 ]
        }
      }
      nodes {
        name: "mm"
        call {
          op: "aten::mm"
          args { value: "x" }
          args { value: "w" }
        }
        tensor {
          dtype: F32
          sizes: [ 4, 4 ]
        }
      }
      nodes {
        name: "t"
        call {
          op: "aten::transpose.int"
          args { value: "mm" }
          args { int_value: 0 }
          args { int_value: 1 }
        }
        tensor {
          dtype: F32
          sizes: [ 4, 4 ]
          strides: [ 1, 4 ]
        }
      }
      nodes {
        name: "v"
        call {
          op: "aten::view"
          args { value: "mm" }
          args { ints { values: [ 16 ] } }
        }
        tensor {
          dtype: F32
          sizes: [ 16 ]
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
          sizes: [ 16 ]
        }
      }
      nodes {
        name: "s"
        call {
          op: "aten::slice.Tensor"
          args { value: "mm" }
          args { int_value: 1 }
          args { int_value: 1 }
          args { int_value: 3 }
        }
        tensor {
          dtype: F32
          sizes: [ 4, 2 ]
          strides: [ 4, 1 ]
          storage_offset: 1
        }
      }
      nodes {
        name: "a"
        call {
          op: "aten::add.Scalar"
          args { value: "c" }
          args { int_value: 2 }
        }
        tensor {
          dtype: I32
          sizes: [ 2 ]
        }
      }
      nodes {
        name: "ln"
        call {
          op: "aten::native_layer_norm"
          args { value: "y" }
          args { ints { values: [ 4 ] } }
          args { none {} }
          args { none {} }
          args { float_value: 1e-5 }
        }
        tuple {
          elements {
            dtype: F32
            sizes: [ 4, 4 ]
          }
          elements {
            dtype: F32
            sizes: [ 4, 1 ]
          }
          elements {
            dtype: F32
            sizes: [ 4, 1 ]
          }
        }
      }
      nodes {
        name: "ln0"
        getitem { source: "ln" index: 0 }
        tensor {
          dtype: F32
          sizes: [ 4, 4 ]
        }
      }
      nodes {
        name: "sum"
        call {
          op: "aten::sum.dim_IntList"
          args { element { node: "ln" index: 1 } }
          args { ints { values: [ -1 ] } }
        }
        tensor {
          dtype: F32
          sizes: [ 4 ]
        }
      }
      nodes {
        name: "n"
        call {
          op: "aten::sym_size.int"
          args { value: "x" }
          args { int_value: 0 }
        }
        scalar: SCALAR_INT
      }
      nodes {
        name: "d"
        delegate {
          module: "m"
          args { value: "mm" }
          args { value: "ln0" }
        }
        tuple {
          elements {
            dtype: F32
            sizes: [ 4, 4 ]
          }
        }
      }
      nodes {
        name: "g"
        getitem { source: "d" index: 0 }
        tensor {
          dtype: F32
          sizes: [ 4, 4 ]
        }
      }
      nodes {
        name: "cat"
        call {
          op: "aten::cat"
          args {
            values {
              values { node: "g" }
              values { node: "x" }
            }
          }
          args { name: "dim" int_value: -1 }
        }
        tensor {
          dtype: F32
          sizes: [ 4, 8 ]
        }
      }
      nodes {
        name: "custom"
        call {
          op: "custom::scale_"
          schema: "custom::scale_(Tensor(a!) self, float s) -> Tensor(a!)"
          args { value: "cat" }
          args { float_value: 2 }
        }
        tensor {
          dtype: F32
          sizes: [ 4, 8 ]
        }
      }
      nodes {
        name: "out"
        output {
          values { value: "custom" }
          values { value: "s" }
          values { value: "sum" }
          values { value: "r" }
          values { value: "a" }
          values { value: "n" }
        }
      }
    }
  )pb";
}

TEST(ValidateTest, CleanProgramHasNoDiagnostics) {
  Diagnostics diagnostics = ValidateText(CleanProgram());
  EXPECT_THAT(diagnostics.items(), IsEmpty())
      << FormatDiagnosticsText(diagnostics, "test");
}

// --- Specs (E02xx)
// -------------------------------------------------------------------

TEST(ValidateTest, InvalidDType) {
  // Import already refuses DTYPE_UNSPECIFIED; validation checks in-memory IR.
  Program program =
      Import(Forward(Input("x", "dtype: F32 sizes: [2]") + Output("x")));
  program.methods[0].nodes[0].tensor.dtype = DType::kInvalid;
  Diagnostic d = Only(Validate(program));
  EXPECT_EQ(d.code, codes::kBadDType);
  EXPECT_EQ(FirstNode(d), "x");
  EXPECT_EQ(d.message, "'x' has no valid dtype");
  EXPECT_EQ(d.method, "forward");
}

TEST(ValidateTest, StridesOfTheWrongRank) {
  Diagnostic d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2, 3] strides: [1]") + Output("x"))));
  EXPECT_EQ(d.code, codes::kBadStrides);
  EXPECT_EQ(FirstNode(d), "x");
  EXPECT_EQ(d.message, "'x' has 1 strides for 2 sizes");
}

TEST(ValidateTest, NegativeStrideAndOffset) {
  Diagnostic d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2, 3] strides: [-3, 1]") + Output("x"))));
  EXPECT_EQ(d.code, codes::kBadStrides);
  EXPECT_EQ(d.message, "'x' has negative stride -3 in dim 0");
  d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2] storage_offset: -1") + Output("x"))));
  EXPECT_EQ(d.code, codes::kBadStrides);
  EXPECT_EQ(d.message, "'x' has negative storage offset -1");
}

TEST(ValidateTest, NegativeSize) {
  // The reader's shape rule is not run over the broken spec.
  Diagnostic d = Only(ValidateText(
      Forward(Input("x", "dtype: F32 sizes: [2, -3]") +
              "nodes { name: 'r' call { op: 'aten::relu' args { value: 'x' } } "
              "tensor { dtype: F32 sizes: [7] } } " +
              Output("r"))));
  EXPECT_EQ(d.code, codes::kBadSizes);
  EXPECT_EQ(FirstNode(d), "x");
  EXPECT_EQ(d.message, "'x' has negative size -3 in dim 1");
}

TEST(ValidateTest, OverflowingElementCountAndExtent) {
  Diagnostic d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [4611686018427387904, 4]") + Output("x"))));
  EXPECT_EQ(d.code, codes::kSpecOverflow);
  EXPECT_EQ(d.message,
            "the element count of 'x' (sizes [4611686018427387904,4]) "
            "overflows int64");
  d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2, 2] strides: [4611686018427387904, 1]") +
      Output("x"))));
  EXPECT_EQ(d.code, codes::kSpecOverflow);
  EXPECT_EQ(FirstNode(d), "x");
  EXPECT_THAT(d.message, HasSubstr("the storage 'x' spans"));
  // Empty (0 elements), but its contiguous strides overflow.
  d = Only(ValidateText(
      Forward(Input("x", "dtype: F32 sizes: [0, 3, 4611686018427387904]") +
              Output("x"))));
  EXPECT_EQ(d.code, codes::kSpecOverflow);
  EXPECT_EQ(d.message,
            "the contiguous strides of 'x' (sizes [0,3,4611686018427387904]) "
            "overflow int64");
}

TEST(ValidateTest, ConstantDataOfTheWrongSize) {
  Diagnostic d = Only(ValidateText(
      "constants { name: 'w' spec { dtype: F32 sizes: [2] } data: 'abc' } " +
      Forward(Input("x", "dtype: F32 sizes: [2]") + Output("x"))));
  EXPECT_EQ(d.code, codes::kOutsideStorage);
  EXPECT_EQ(FirstNode(d), "w");
  EXPECT_EQ(d.message,
            "constant 'w' has 3 bytes of data, but its spec f32[2] with "
            "strides [1] and offset 0 spans 8 bytes");
  // Data covers the storage the spec spans, offset and gaps included.
  Diagnostics clean = ValidateText(
      "constants { name: 'w' spec { dtype: I8 sizes: [2] strides: [2] "
      "storage_offset: 1 } data: 'abcd' } " +
      Forward(Input("x", "dtype: F32 sizes: [2]") + Output("x")));
  EXPECT_THAT(clean.items(), IsEmpty());
}

TEST(ValidateTest, BlobReferencesNameExactlyTheStorage) {
  const std::string hash(64, 'a');
  const std::string program_tail =
      Forward(Input("x", "dtype: F32 sizes: [2]") + Output("x"));
  // The size the spec spans: clean (the bytes are the server's concern).
  EXPECT_THAT(ValidateText("constants { name: 'w' spec { dtype: F32 sizes: "
                           "[2] } data_digest { hash: '" +
                           hash + "' size_bytes: 8 } } " + program_tail)
                  .items(),
              IsEmpty());
  Diagnostic d = Only(ValidateText(
      "constants { name: 'w' spec { dtype: F32 sizes: [2] } data_digest { "
      "hash: '" +
      hash + "' size_bytes: 12 } } " + program_tail));
  EXPECT_EQ(d.code, codes::kBadBlobRef);
  EXPECT_EQ(FirstNode(d), "w");
  EXPECT_EQ(d.message,
            "constant 'w''s blob has 12 bytes, but its spec f32[2] with "
            "strides [1] and offset 0 spans 8 bytes");
  d = Only(ValidateText(
      "constants { name: 'w' spec { dtype: F32 sizes: [2] } data_digest { "
      "hash: 'ABC' size_bytes: 8 } } " +
      program_tail));
  EXPECT_EQ(d.code, codes::kBadBlobRef);
  EXPECT_THAT(d.message, HasSubstr("is not 64 lowercase hex digits"));
  d = Only(ValidateText(
      "constants { name: 'w' spec { dtype: F32 sizes: [2] } data: '12345678' "
      "data_digest { hash: '" +
      hash + "' size_bytes: 8 } } " + program_tail));
  EXPECT_EQ(d.code, codes::kBadBlobRef);
  EXPECT_EQ(d.message, "constant 'w' has both data and data_digest");
}

TEST(ValidateTest, NegativeDeviceIndex) {
  Program program =
      Import(Forward(Input("x", "dtype: F32 sizes: [2]") + Output("x")));
  program.methods[0].nodes[0].tensor.SetDevice(Device::Cuda(-1));
  Diagnostic d = Only(Validate(program));
  EXPECT_EQ(d.code, codes::kBadDevice);
  EXPECT_EQ(FirstNode(d), "x");
  EXPECT_EQ(d.message,
            "'x' is on device 'cuda:-1': the device index must be "
            ">= 0");
}

// --- Calls (E03xx)
// -------------------------------------------------------------------

TEST(ValidateTest, Arity) {
  Diagnostic d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2]") +
      "nodes { name: 'r' call { op: 'aten::relu' args { value: 'x' } args { "
      "value: 'x' } } tensor { dtype: F32 sizes: [2] } } " +
      Output("r"))));
  EXPECT_EQ(d.code, codes::kArity);
  EXPECT_EQ(FirstNode(d), "r");
  EXPECT_EQ(d.message, "'aten::relu' takes 1 argument, got 2 positional");

  d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2]") +
      "nodes { name: 'a' call { op: 'aten::add.Tensor' args { value: 'x' } } "
      "tensor { dtype: F32 sizes: [2] } } " +
      Output("a"))));
  EXPECT_EQ(d.code, codes::kArity);
  EXPECT_EQ(d.message, "'aten::add.Tensor' is missing argument 'other'");
}

TEST(ValidateTest, ArgumentType) {
  Diagnostic d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2]") +
      "nodes { name: 'a' call { op: 'aten::add.Tensor' args { value: 'x' } "
      "args { int_value: 3 } } tensor { dtype: F32 sizes: [2] } } " +
      Output("a"))));
  EXPECT_EQ(d.code, codes::kArgumentType);
  EXPECT_EQ(FirstNode(d), "a");
  EXPECT_EQ(d.message,
            "argument 'other' of 'aten::add.Tensor' must be Tensor, got int 3");

  // A custom operator's own schema is checked too.
  d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2]") +
      "nodes { name: 'c' call { op: 'custom::scale_' schema: "
      "'custom::scale_(Tensor(a!) self, float s) -> Tensor(a!)' args { value: "
      "'x' } args { value: 'x' } } tensor { dtype: F32 sizes: [2] } } " +
      Output("c"))));
  EXPECT_EQ(d.code, codes::kArgumentType);
  EXPECT_THAT(d.nodes, ElementsAre("c", "x"));
  EXPECT_EQ(d.message,
            "argument 's' of 'custom::scale_' must be float, got tensor 'x'");
}

TEST(ValidateTest, ShapeMismatchFromTheRule) {
  Diagnostic d = Only(ValidateText(Forward(
      Input("a", "dtype: F32 sizes: [2, 3]") +
      Input("b", "dtype: F32 sizes: [4, 5]") +
      "nodes { name: 'y' call { op: 'aten::mm' args { value: 'a' } args { "
      "value: 'b' } } tensor { dtype: F32 sizes: [2, 5] } } " +
      Output("y"))));
  EXPECT_EQ(d.code, codes::kShapeMismatch);
  EXPECT_EQ(FirstNode(d), "y");
  EXPECT_EQ(d.message,
            "aten::mm of f32[2,3] and f32[4,5]: inner dimensions 3 and 4 "
            "differ");
}

TEST(ValidateTest, DeclaredSizesDifferFromTheComputedOnes) {
  Diagnostic d = Only(ValidateText(Forward(
      Input("a", "dtype: F32 sizes: [2, 3]") +
      Input("b", "dtype: F32 sizes: [3, 5]") +
      "nodes { name: 'y' call { op: 'aten::mm' args { value: 'a' } args { "
      "value: 'b' } } tensor { dtype: F32 sizes: [2, 4] } } " +
      Output("y"))));
  EXPECT_EQ(d.code, codes::kShapeMismatch);
  EXPECT_EQ(FirstNode(d), "y");
  EXPECT_EQ(d.message,
            "'aten::mm' computes f32[2,5], but 'y' is declared f32[2,4]");
}

TEST(ValidateTest, ViewStridesMustBeTheComputedOnes) {
  Diagnostic d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2, 3]") +
      "nodes { name: 't' call { op: 'aten::transpose.int' args { value: 'x' "
      "} args { int_value: 0 } args { int_value: 1 } } tensor { dtype: F32 "
      "sizes: [3, 2] } } " +
      Output("t"))));
  EXPECT_EQ(d.code, codes::kShapeMismatch);
  EXPECT_EQ(FirstNode(d), "t");
  EXPECT_EQ(d.message,
            "'aten::transpose.int' computes f32[3,2] with strides [1,3] and "
            "offset 0, but 't' is declared with strides [2,1] and offset 0");

  // The same view of an impossible geometry is refused by the rule.
  d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2, 3] strides: [1, 2]") +
      "nodes { name: 'v' call { op: 'aten::view' args { value: 'x' } args { "
      "ints { values: [6] } } } tensor { dtype: F32 sizes: [6] } } " +
      Output("v"))));
  EXPECT_EQ(d.code, codes::kShapeMismatch);
  EXPECT_EQ(FirstNode(d), "v");
  EXPECT_THAT(d.message,
              HasSubstr("view is not compatible with input strides"));
}

TEST(ValidateTest, DTypeMismatch) {
  Diagnostic d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [4]") +
      "nodes { name: 'y' call { op: 'aten::add.Tensor' args { value: 'x' } "
      "args { value: 'x' } } tensor { dtype: I32 sizes: [4] } } " +
      Output("y"))));
  EXPECT_EQ(d.code, codes::kDTypeMismatch);
  EXPECT_EQ(FirstNode(d), "y");
  EXPECT_EQ(d.message,
            "'aten::add.Tensor' computes f32[4], but 'y' is declared i32[4]");

  // Operands the rule refuses for their dtypes are dtype mismatches too.
  d = Only(ValidateText(Forward(
      Input("a", "dtype: F32 sizes: [2, 3]") +
      Input("b", "dtype: F16 sizes: [3, 2]") +
      "nodes { name: 'y' call { op: 'aten::mm' args { value: 'a' } args { "
      "value: 'b' } } tensor { dtype: F32 sizes: [2, 2] } } " +
      Output("y"))));
  EXPECT_EQ(d.code, codes::kDTypeMismatch);
  EXPECT_EQ(FirstNode(d), "y");
}

TEST(ValidateTest, ResultCount) {
  Diagnostic d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2, 4]") +
      "nodes { name: 'ln' call { op: 'aten::native_layer_norm' args { value: "
      "'x' } args { ints { values: [4] } } args { none {} } args { none {} } "
      "args { float_value: 1e-5 } } tuple { elements { dtype: F32 sizes: [2, "
      "4] } elements { dtype: F32 sizes: [2, 1] } } } " +
      "nodes { name: 'g' getitem { source: 'ln' index: 0 } tensor { dtype: "
      "F32 sizes: [2, 4] } } " +
      Output("g"))));
  EXPECT_EQ(d.code, codes::kResultCount);
  EXPECT_EQ(FirstNode(d), "ln");
  EXPECT_EQ(d.message,
            "'aten::native_layer_norm' returns a tuple of 3, but 'ln' declares "
            "a tuple of 2");

  d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2, 4]") +
      "nodes { name: 'n' call { op: 'aten::sym_size.int' args { value: 'x' } "
      "args { int_value: 0 } } tensor { dtype: I64 sizes: [] } } " +
      Output("n"))));
  EXPECT_EQ(d.code, codes::kResultCount);
  EXPECT_EQ(d.message,
            "'aten::sym_size.int' returns an int scalar, but 'n' declares a "
            "tensor");

  d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2, 4]") +
      "nodes { name: 'n' call { op: 'aten::sym_numel' args { value: 'x' } } "
      "scalar: SCALAR_FLOAT } " +
      Output("n"))));
  EXPECT_EQ(d.code, codes::kResultCount);
  EXPECT_EQ(d.message,
            "'aten::sym_numel' returns an int scalar, but 'n' declares a float "
            "scalar");
}

TEST(ValidateTest, GetItemAndProgramDataMatchWhatTheyRead) {
  Diagnostic d = Only(ValidateText(Forward(
      Input("x", "dtype: F32 sizes: [2, 4]") +
      "nodes { name: 'ln' call { op: 'aten::native_layer_norm' args { value: "
      "'x' } args { ints { values: [4] } } args { none {} } args { none {} } "
      "args { float_value: 1e-5 } } tuple { elements { dtype: F32 sizes: [2, "
      "4] } elements { dtype: F32 sizes: [2, 1] } elements { dtype: F32 "
      "sizes: [2, 1] } } } " +
      "nodes { name: 'g' getitem { source: 'ln' index: 1 } tensor { dtype: "
      "F32 sizes: [2, 4] } } " +
      Output("g"))));
  EXPECT_EQ(d.code, codes::kShapeMismatch);
  EXPECT_EQ(FirstNode(d), "g");
  EXPECT_EQ(d.message, "'ln[1]' is f32[2,1], but 'g' is declared f32[2,4]");

  d = Only(ValidateText(
      "constants { name: 'w' spec { dtype: F32 sizes: [4, 3] } } " +
      Forward("nodes { name: 'w' input { kind: PARAMETER target: 'w' } tensor "
              "{ dtype: F16 sizes: [4, 3] } } " +
              Output("w"))));
  EXPECT_EQ(d.code, codes::kDTypeMismatch);
  EXPECT_EQ(FirstNode(d), "w");
  EXPECT_EQ(d.message,
            "constant 'w' is f32[4,3], but 'w' is declared f16[4,3]");
}

// --- Delegates and modules (E04xx)
// ----------------------------------------------------------

TEST(ValidateTest, TargetDevices) {
  for (const char* accepted : {"cuda:0", "cuda:1", "cpu", "CUDA:0", "Cuda:2",
                               "cuda", "", "cuda:32767"}) {
    SCOPED_TRACE(accepted);
    Diagnostics diagnostics = ValidateText(DelegateProgram(accepted));
    EXPECT_THAT(diagnostics.items(), IsEmpty())
        << FormatDiagnosticsText(diagnostics, "test");
  }
  for (const char* refused : {"tpu:0", "cuda:x", "cuda:-1",
                              "cuda:", "cuda:32768", "cuda:4294967296"}) {
    SCOPED_TRACE(refused);
    Diagnostic d = Only(ValidateText(DelegateProgram(refused)));
    EXPECT_EQ(d.code, codes::kBadTargetDevice);
    EXPECT_EQ(FirstNode(d), "d");
    EXPECT_EQ(d.method, "forward");
    EXPECT_THAT(d.message,
                HasSubstr(std::string("delegate 'd' calls module 'm', whose "
                                      "target_device '") +
                          refused + "' is invalid: "));
  }
}

TEST(ValidateTest, UncalledModuleWithABadTargetDevice) {
  Diagnostic d = Only(
      ValidateText(Module("tpu:0") +
                   Forward(Input("x", "dtype: F32 sizes: [2]") + Output("x"))));
  EXPECT_EQ(d.code, codes::kBadTargetDevice);
  EXPECT_EQ(d.method, "module:m");
  EXPECT_THAT(d.message, HasSubstr("module 'm' has an invalid target_device "
                                   "'tpu:0'"));
}

TEST(ValidateTest, DelegateArity) {
  Diagnostic d = Only(ValidateText(
      Module("cuda:0") +
      Forward(
          std::string(kXY) +
          "nodes { name: 'd' delegate { module: 'm' args { value: 'x' } } " +
          kTupleResult + " } " +
          "nodes { name: 'g' getitem { source: 'd' index: 0 } tensor { "
          "dtype: F32 sizes: [4, 4] } } " +
          Output("g"))));
  EXPECT_EQ(d.code, codes::kDelegateArity);
  EXPECT_EQ(FirstNode(d), "d");
  EXPECT_EQ(d.message,
            "delegate 'd' passes 1 argument to module 'm', which has 2 user "
            "inputs");
}

TEST(ValidateTest, DelegateArgumentsMatchTheModuleInputs) {
  Diagnostic d = Only(ValidateText(
      Module("cuda:0") +
      Forward(Input("x", "dtype: F32 sizes: [4, 4]") +
              Input("y", "dtype: F32 sizes: [4]") + DelegateCall(kTupleResult) +
              "nodes { name: 'g' getitem { source: 'd' index: 0 } tensor { "
              "dtype: F32 sizes: [4, 4] } } " +
              Output("g"))));
  EXPECT_EQ(d.code, codes::kShapeMismatch);
  EXPECT_THAT(d.nodes, ElementsAre("d", "y"));
  EXPECT_EQ(d.message,
            "module 'm' takes input 'b' as f32[4,4], but argument 1 'y' of "
            "delegate 'd' is declared f32[4]");
}

TEST(ValidateTest, DelegateResultTupleOrBare) {
  // The module returns a tuple; the delegate declares a bare tensor.
  Diagnostic d = Only(
      ValidateText(Module("cuda:0") +
                   Forward(std::string(kXY) +
                           DelegateCall("tensor { dtype: F32 sizes: [4, 4] }") +
                           Output("d"))));
  EXPECT_EQ(d.code, codes::kDelegateResult);
  EXPECT_EQ(FirstNode(d), "d");
  EXPECT_EQ(d.message,
            "delegate 'd' calls module 'm', which returns a tuple, but 'd' "
            "declares a tensor");

  // The module returns a bare tensor; the delegate declares a tuple.
  d = Only(ValidateText(
      Module("cuda:0", /*returns_tuple=*/false) +
      Forward(std::string(kXY) + DelegateCall(kTupleResult) +
              "nodes { name: 'g' getitem { source: 'd' index: 0 } tensor { "
              "dtype: F32 sizes: [4, 4] } } " +
              Output("g"))));
  EXPECT_EQ(d.code, codes::kDelegateResult);
  EXPECT_EQ(FirstNode(d), "d");
  EXPECT_EQ(d.message,
            "delegate 'd' calls module 'm', which returns one bare tensor, but "
            "'d' declares a tuple of 1");

  // A bare result is fine when the module returns one.
  Diagnostics clean =
      ValidateText(Module("cuda:0", /*returns_tuple=*/false) +
                   Forward(std::string(kXY) +
                           DelegateCall("tensor { dtype: F32 sizes: [4, 4] }") +
                           Output("d")));
  EXPECT_THAT(clean.items(), IsEmpty()) << FormatDiagnosticsText(clean, "test");

  // A tuple of the wrong length.
  d = Only(ValidateText(
      Module("cuda:0") +
      Forward(std::string(kXY) +
              DelegateCall("tuple { elements { dtype: F32 sizes: [4, 4] } "
                           "elements { dtype: F32 sizes: [4, 4] } }") +
              "nodes { name: 'g' getitem { source: 'd' index: 0 } tensor { "
              "dtype: F32 sizes: [4, 4] } } " +
              Output("g"))));
  EXPECT_EQ(d.code, codes::kDelegateResult);
  EXPECT_EQ(d.message,
            "module 'm' returns 1 value, but delegate 'd' declares a tuple of "
            "2");
}

TEST(ValidateTest, InputLayoutsCountMatchesUserInputs) {
  Diagnostic d = Only(ValidateText(
      Module("cuda:0", /*returns_tuple=*/true, /*layouts=*/1) +
      Forward(std::string(kXY) + DelegateCall(kTupleResult) +
              "nodes { name: 'g' getitem { source: 'd' index: 0 } tensor { "
              "dtype: F32 sizes: [4, 4] } } " +
              Output("g"))));
  EXPECT_EQ(d.code, codes::kBadModule);
  EXPECT_EQ(d.method, "module:m");
  EXPECT_THAT(d.nodes, ElementsAre("a", "b"));
  EXPECT_EQ(d.message, "module 'm' has 1 input layout for 2 user inputs");
}

TEST(ValidateTest, ModuleGraphsAreValidatedAsMethods) {
  std::string module =
      "modules { id: 'm' backend: 'FerryCudaBackend' graph { name: 'm' " +
      Input("a", "dtype: F32 sizes: [2, 3]") +
      "nodes { name: 'mm' call { op: 'aten::mm' args { value: 'a' } args { "
      "value: 'a' } } tensor { dtype: F32 sizes: [2, 3] } } " +
      Output("mm") +
      " } input_layouts { dtype: F32 sizes: [2, 3] } returns_tuple: false }";
  Diagnostic d = Only(ValidateText(
      module +
      Forward(Input("x", "dtype: F32 sizes: [2, 3]") +
              "nodes { name: 'd' delegate { module: 'm' args { value: 'x' } } "
              "tensor { dtype: F32 sizes: [2, 3] } } " +
              Output("d"))));
  EXPECT_EQ(d.code, codes::kShapeMismatch);
  EXPECT_EQ(d.method, "module:m");
  EXPECT_EQ(FirstNode(d), "mm");
  EXPECT_EQ(d.message,
            "aten::mm of f32[2,3] and f32[2,3]: inner dimensions 3 and 2 "
            "differ");
}

// --- What the runtime needs (E0117, E0207, E0208, E0306, E0409-E0412)
// ----------------------------------------------------------------------

// Each of these programs passed validation before and was refused by the
// runtime (so `ferry check` was clean but `ferry verify` could not run it).

TEST(ValidateTest, OutputsMustBeValues) {
  Diagnostics d = ValidateText(
      Forward(std::string(kXY) +
              "nodes { name: 'out' output { values { value: 'x' } values { "
              "int_value: 3 } values { } } }"));
  ASSERT_EQ(d.items().size(), 2u) << FormatDiagnosticsText(d, "test");
  EXPECT_EQ(d.items()[0].code, codes::kOutputNotAValue);
  EXPECT_EQ(d.items()[0].message,
            "output 1 of method 'forward' is int 3, not a value");
  EXPECT_EQ(FirstNode(d.items()[0]), "out");
  EXPECT_EQ(d.items()[1].code, codes::kOutputNotAValue);
  EXPECT_EQ(d.items()[1].message,
            "output 2 of method 'forward' is None, not a value");
}

TEST(ValidateTest, ModuleOutputsMustBeTensors) {
  // The module returns sym_size's scalar: fine from a method, not from a
  // module (its delegate writes tensors).
  const std::string module =
      "modules { id: 'm' backend: 'FerryHostBackend' graph { name: 'm' " +
      Input("a", "dtype: F32 sizes: [4, 4]") +
      "nodes { name: 'n' call { op: 'aten::sym_size.int' args { value: 'a' } "
      "args { int_value: 0 } } scalar: SCALAR_INT } " +
      Output("n") +
      " } input_layouts { dtype: F32 sizes: [4, 4] } returns_tuple: false }";
  Diagnostics d = ValidateText(
      module + Forward(std::string(kXY) +
                       "nodes { name: 'd' delegate { module: 'm' args { value: "
                       "'x' } } tensor { dtype: F32 sizes: [4, 4] } } " +
                       Output("d")));
  Diagnostic only = Only(d);
  EXPECT_EQ(only.code, codes::kModuleOutputNotTensor);
  EXPECT_EQ(only.message,
            "output 0 of module 'm' is scalar 'n': a lowered module returns "
            "tensors");
  EXPECT_EQ(only.method, "module:m");
}

TEST(ValidateTest, ProgramDataIsReadWithTheTablesLayout) {
  const std::string constant =
      "constants { name: 'w' spec { dtype: F32 sizes: [4, 4] } seed: 1 } ";
  Diagnostics strides = ValidateText(
      constant + Forward("nodes { name: 'p' input { kind: PARAMETER target: "
                         "'w' } tensor { dtype: F32 sizes: [4, 4] strides: "
                         "[1, 4] } } " +
                         Output("p")));
  Diagnostic s = Only(strides);
  EXPECT_EQ(s.code, codes::kConstantLayout);
  EXPECT_EQ(FirstNode(s), "p");
  EXPECT_EQ(s.message,
            "constant 'w' is stored as f32[4,4] with strides [4,1] and offset "
            "0, but 'p' reads it as f32[4,4] with strides [1,4] and offset 0");
  // A storage offset the table does not have (a constant node this time).
  Diagnostic offset = Only(ValidateText(
      "constants { name: 'w' spec { dtype: F32 sizes: [4] storage_offset: 2 "
      "} seed: 1 } " +
      Forward("nodes { name: 'c' constant { name: 'w' } tensor { dtype: F32 "
              "sizes: [4] } } " +
              Output("c"))));
  EXPECT_EQ(offset.code, codes::kConstantLayout);
  EXPECT_THAT(offset.message, HasSubstr("stored as f32[4] with strides [1] "
                                        "and offset 2, but 'c' reads it as "
                                        "f32[4] with strides [1] and offset "
                                        "0"));
}

TEST(ValidateTest, DelegateArgumentsAreLaidOutAsCompiled) {
  // x is offset by 16 elements in its storage; the module was compiled for
  // offset 0.
  Diagnostics d = ValidateText(
      Module("cuda:0") +
      Forward("nodes { name: 'x' input { kind: USER_INPUT } tensor { dtype: "
              "F32 sizes: [4, 4] storage_offset: 16 } } "
              "nodes { name: 'y' input { kind: USER_INPUT } tensor { dtype: "
              "F32 sizes: [4, 4] } } " +
              DelegateCall(kTupleResult) +
              "nodes { name: 'g' getitem { source: 'd' index: 0 } tensor { "
              "dtype: F32 sizes: [4, 4] } } " +
              Output("g")));
  Diagnostic only = Only(d);
  EXPECT_EQ(only.code, codes::kDelegateLayout);
  EXPECT_THAT(only.nodes, ElementsAre("d", "x"));
  EXPECT_EQ(only.message,
            "argument 0 'x' of delegate 'd' is laid out as f32[4,4] with "
            "strides [4,1] and offset 16, but module 'm' was compiled for "
            "f32[4,4] with strides [4,1] and offset 0");
}

TEST(ValidateTest, ViewsAndGetItemsStayInsideTheirStorage) {
  // A custom view (no shape rule) and a getitem reaching past the storage.
  Diagnostics view = ValidateText(Forward(
      std::string(kXY) +
      "nodes { name: 'v' call { op: 'custom::window' schema: "
      "'custom::window(Tensor(a) self) -> Tensor(a)' args { value: 'x' } } "
      "tensor { dtype: F32 sizes: [4, 4] storage_offset: 8 } } " +
      Output("v")));
  Diagnostic v = Only(view);
  EXPECT_EQ(v.code, codes::kOutsideStorage);
  EXPECT_EQ(FirstNode(v), "v");
  EXPECT_EQ(v.message,
            "'v' aliases 'x', whose storage has 64 bytes, but its spec "
            "f32[4,4] with strides [4,1] and offset 8 reaches 96 bytes");
  Diagnostics getitem = ValidateText(
      Module("cuda:0") +
      Forward(std::string(kXY) + DelegateCall(kTupleResult) +
              "nodes { name: 'g' getitem { source: 'd' index: 0 } tensor { "
              "dtype: F32 sizes: [4, 4] strides: [8, 1] } } " +
              Output("g")));
  Diagnostic g = Only(getitem);
  EXPECT_EQ(g.code, codes::kOutsideStorage);
  EXPECT_EQ(FirstNode(g), "g");
}

TEST(ValidateTest, CopiesKeepTheirSourcesLayout) {
  Diagnostic d = Only(ValidateText(Forward(
      std::string(kXY) +
      "nodes { name: 'c' call { op: 'et_copy::_h2d_copy' args { value: 'x' } "
      "} tensor { dtype: F32 sizes: [4, 4] strides: [1, 4] device { type: "
      "'cuda' } } } " +
      Output("c"))));
  EXPECT_EQ(d.code, codes::kShapeMismatch);
  EXPECT_EQ(FirstNode(d), "c");
  EXPECT_THAT(d.message, HasSubstr("a copy cannot change the layout"));
}

TEST(ValidateTest, OnlyMetadataOperatorsReturnScalars) {
  Diagnostic d = Only(ValidateText(Forward(
      std::string(kXY) +
      "nodes { name: 'n' call { op: 'custom::count' schema: "
      "'custom::count(Tensor self) -> int' args { value: 'x' } } scalar: "
      "SCALAR_INT } " +
      Output("n"))));
  EXPECT_EQ(d.code, codes::kScalarFromDataOp);
  EXPECT_EQ(FirstNode(d), "n");
  EXPECT_THAT(d.message, HasSubstr("'n' calls 'custom::count', which returns "
                                   "a scalar but is not a registered "
                                   "metadata operator"));
}

TEST(ValidateTest, PlannedValuesLieInsideTheirArenas) {
  auto program = [](const std::string& x_memory, const std::string& arenas) {
    return Forward(
        "nodes { name: 'x' input { kind: USER_INPUT } tensor { dtype: F32 "
        "sizes: [4, 4] memory { " +
        x_memory + " } } } " + Output("x") + " " + arenas);
  };
  const std::string one_arena = "arenas { device { type: 'cpu' } size: 64 }";
  EXPECT_THAT(
      ValidateText(program("size: 64 planned: true", one_arena)).items(),
      IsEmpty());
  Diagnostic arena =
      Only(ValidateText(program("arena: 1 size: 64 planned: true", one_arena)));
  EXPECT_EQ(arena.code, codes::kBadPlacement);
  EXPECT_EQ(arena.message,
            "'x' is planned in arena 1, but method 'forward' has 1 arena");
  Diagnostic past_end = Only(
      ValidateText(program("offset: 32 size: 64 planned: true", one_arena)));
  EXPECT_EQ(past_end.code, codes::kBadPlacement);
  EXPECT_EQ(past_end.message,
            "'x' is planned at offset 32 size 64 of arena 0 (64 bytes), but "
            "its storage spans 64 bytes");
  Diagnostic too_small =
      Only(ValidateText(program("size: 32 planned: true", one_arena)));
  EXPECT_EQ(too_small.code, codes::kBadPlacement);
  Diagnostics negative =
      ValidateText(program("size: 64 planned: true", "arenas { size: -64 }"));
  ASSERT_FALSE(negative.items().empty());
  EXPECT_EQ(negative.items()[0].code, codes::kBadPlacement);
  EXPECT_EQ(negative.items()[0].message,
            "arena 0 of method 'forward' has negative size -64");
}

// A module `inner` called from module `outer`, each with a target device.
std::string NestedDelegate(const std::string& outer_target,
                           const std::string& inner_target,
                           const std::string& outer_extra = "") {
  auto module = [](const std::string& id, const std::string& target,
                   const std::string& body) {
    std::string text = "modules { id: '" + id + "' backend: 'B' ";
    if (!target.empty())
      text += "compile_specs { key: 'target_device' value: '" + target + "' } ";
    return text + "graph { name: '" + id + "' " +
           Input("a", "dtype: F32 sizes: [4, 4]") + body +
           " } input_layouts { dtype: F32 sizes: [4, 4] } returns_tuple: "
           "false } ";
  };
  return module("inner", inner_target,
                "nodes { name: 'r' call { op: 'aten::relu' args { value: 'a' "
                "} } tensor { dtype: F32 sizes: [4, 4] } } " +
                    Output("r")) +
         module("outer", outer_target,
                outer_extra +
                    "nodes { name: 'call_inner' delegate { module: 'inner' "
                    "args { value: 'a' } } tensor { dtype: F32 sizes: [4, 4] "
                    "} } " +
                    Output("call_inner")) +
         Forward(std::string(kXY) +
                 "nodes { name: 'd' delegate { module: 'outer' args { value: "
                 "'x' } } tensor { dtype: F32 sizes: [4, 4] } } " +
                 Output("d"));
}

TEST(ValidateTest, NestedDelegatesRunOnTheirParentsDevice) {
  EXPECT_THAT(ValidateText(NestedDelegate("cuda:0", "cuda:0")).items(),
              IsEmpty());
  EXPECT_THAT(ValidateText(NestedDelegate("cuda:0", "cpu")).items(), IsEmpty());
  Diagnostic other = Only(ValidateText(NestedDelegate("cuda:0", "cuda:1")));
  EXPECT_EQ(other.code, codes::kNestedDelegateDevice);
  EXPECT_EQ(FirstNode(other), "call_inner");
  EXPECT_EQ(other.message,
            "delegate 'call_inner' inside module 'outer' (on cuda:0) calls "
            "module 'inner' on cuda:1: a nested delegate must target its "
            "parent's device");
  Diagnostic from_host = Only(ValidateText(NestedDelegate("", "cuda:0")));
  EXPECT_EQ(from_host.code, codes::kNestedDelegateDevice);
}

// A module called only from another module's graph is a called module: its
// invalid target device is reported once, at the delegate that calls it.
TEST(ValidateTest, AModuleCalledFromAModuleIsReportedAtItsCaller) {
  Diagnostic d = Only(ValidateText(NestedDelegate("", "tpu:0")));
  EXPECT_EQ(d.code, codes::kBadTargetDevice);
  EXPECT_EQ(d.method, "module:outer");
  EXPECT_EQ(FirstNode(d), "call_inner");
}

TEST(ValidateTest, DeviceModulesHoldNoHostDeviceCopies) {
  const std::string copy =
      "nodes { name: 'c' call { op: 'et_copy::_d2h_copy' args { value: 'a' } "
      "} tensor { dtype: F32 sizes: [4, 4] } } ";
  EXPECT_THAT(ValidateText(NestedDelegate("", "", copy)).items(), IsEmpty());
  Diagnostic d = Only(ValidateText(NestedDelegate("cuda:0", "", copy)));
  EXPECT_EQ(d.code, codes::kCopyInDeviceModule);
  EXPECT_EQ(FirstNode(d), "c");
  EXPECT_EQ(d.method, "module:outer");
}

// A node schema whose result aliases storage no argument has is refused at
// import (FERRY-E0111), naming the node.
TEST(ValidateTest, InconsistentAliasSchemaIsABadSchema) {
  v1::Program proto;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      Forward(std::string(kXY) +
              "nodes { name: 'v' call { op: 'custom::v' schema: "
              "'custom::v(Tensor(a) self) -> Tensor(b)' args { value: 'x' } } "
              "tensor { dtype: F32 sizes: [4, 4] } } " +
              Output("v")),
      &proto));
  Diagnostics diagnostics;
  ImportProgram(proto, diagnostics);
  Diagnostic d = Only(diagnostics);
  EXPECT_EQ(d.code, codes::kBadSchema);
  EXPECT_EQ(FirstNode(d), "v");
  EXPECT_THAT(d.message, HasSubstr("return 0 is in alias set 'b', which no "
                                   "parameter has"));
}

// --- The module call graph (E0406-E0408)
// ----------------------------------------------------------------------

// Modules m0 .. m<depth-1> on the host, each calling the next from `calls`
// (1 or 2) delegates (summed), the last computing relu; `cycle`: the last
// calls m0 instead. The method calls m0 once.
std::string NestedModules(int depth, int calls = 1, bool cycle = false) {
  auto delegate = [](const std::string& name, const std::string& module) {
    return "nodes { name: '" + name + "' delegate { module: '" + module +
           "' args { value: 'a' } } tensor { dtype: F32 sizes: [4] } } ";
  };
  std::string text;
  for (int k = 0; k < depth; ++k) {
    const std::string id = "m" + std::to_string(k);
    const bool last = k == depth - 1;
    const std::string callee =
        last ? (cycle ? "m0" : "") : "m" + std::to_string(k + 1);
    std::string body = Input("a", "dtype: F32 sizes: [4]");
    std::string result = "r";
    if (callee.empty()) {
      body +=
          "nodes { name: 'r' call { op: 'aten::relu' args { value: 'a' } "
          "} tensor { dtype: F32 sizes: [4] } } ";
    } else {
      body += delegate("r", callee);
      if (calls == 2) {
        body += delegate("r1", callee) +
                "nodes { name: 's' call { op: 'aten::add.Tensor' args { "
                "value: 'r' } args { value: 'r1' } } tensor { dtype: F32 "
                "sizes: [4] } } ";
        result = "s";
      }
    }
    text += "modules { id: '" + id +
            "' backend: 'FerryHostBackend' graph { "
            "name: '" +
            id + "' " + body + Output(result) +
            " } input_layouts { dtype: F32 sizes: [4] } returns_tuple: false "
            "} ";
  }
  return text + Forward(Input("x", "dtype: F32 sizes: [4]") +
                        "nodes { name: 'y' delegate { module: 'm0' args { "
                        "value: 'x' } } tensor { dtype: F32 sizes: [4] } } " +
                        Output("y"));
}

TEST(ValidateTest, AModuleCallingItselfIsACycle) {
  Diagnostic d = Only(ValidateText(NestedModules(1, 1, /*cycle=*/true)));
  EXPECT_EQ(d.code, codes::kModuleCycle);
  EXPECT_EQ(d.method, "module:m0");
  EXPECT_EQ(FirstNode(d), "r");
  EXPECT_EQ(d.message,
            "module 'm0' calls itself (delegate 'r'): lowered modules cannot "
            "recurse");
  // Two calls of itself: still one diagnostic for the module.
  Diagnostic twice = Only(ValidateText(NestedModules(1, 2, /*cycle=*/true)));
  EXPECT_EQ(twice.code, codes::kModuleCycle);
}

TEST(ValidateTest, ModulesCallingEachOtherAreACycle) {
  Diagnostic two = Only(ValidateText(NestedModules(2, 1, /*cycle=*/true)));
  EXPECT_EQ(two.code, codes::kModuleCycle);
  EXPECT_EQ(two.method, "module:m1");
  EXPECT_EQ(FirstNode(two), "r");
  EXPECT_EQ(two.message,
            "lowered modules call each other in a cycle: 'm0' -> 'm1' -> "
            "'m0'; lowered modules cannot recurse");
  // A long cycle names its ends.
  Diagnostic long_cycle =
      Only(ValidateText(NestedModules(100, 1, /*cycle=*/true)));
  EXPECT_EQ(long_cycle.code, codes::kModuleCycle);
  EXPECT_THAT(long_cycle.message,
              HasSubstr("'m0' -> 'm1' -> 'm2' -> 'm3' -> ... (93 more) -> "
                        "'m97' -> 'm98' -> 'm99' -> 'm0'"));
}

TEST(ValidateTest, ModuleNestingIsBounded) {
  EXPECT_THAT(ValidateText(NestedModules(kMaxModuleNesting)).items(),
              IsEmpty());
  Diagnostic one_more = Only(ValidateText(NestedModules(65)));
  EXPECT_EQ(one_more.code, codes::kModuleNestingTooDeep);
  EXPECT_THAT(one_more.message, HasSubstr("chain of 65 nested"));
  // 8,000 levels: one diagnostic, found without recursion.
  Diagnostic deep = Only(ValidateText(NestedModules(8000)));
  EXPECT_EQ(deep.code, codes::kModuleNestingTooDeep);
  EXPECT_EQ(deep.method, "module:m0");
  EXPECT_EQ(FirstNode(deep), "r");
  EXPECT_EQ(deep.message,
            "module 'm0' starts a chain of 8000 nested lowered modules ('m0' "
            "-> 'm1' -> 'm2' -> 'm3' -> ... (7992 more) -> 'm7996' -> 'm7997' "
            "-> 'm7998' -> 'm7999'); at most 64 may nest");
}

TEST(ValidateTest, ModuleCallsMayNotMultiplyWithoutBound) {
  // Two calls per level: 2^39 instances of m39.
  Diagnostic d = Only(ValidateText(NestedModules(40, /*calls=*/2)));
  EXPECT_EQ(d.code, codes::kModuleExpansionTooLarge);
  EXPECT_EQ(d.method, "forward");
  EXPECT_EQ(d.message,
            "method 'forward' instantiates more than 2000000 nodes through "
            "its delegates' modules (each call of a module instantiates its "
            "graph once)");
  EXPECT_THAT(ValidateText(NestedModules(10, /*calls=*/2)).items(), IsEmpty());
}

// --- Robustness
// ----------------------------------------------------------------------

// Random corruptions of a valid program's IR (specs, arguments, results,
// modules) give diagnostics, never a crash.
TEST(ValidateTest, FuzzedProgramsNeverCrash) {
  const Program clean = Import(CleanProgram());
  std::mt19937_64 random(11);
  const int64_t kHuge = int64_t{1} << 62;
  const std::vector<int64_t> pool = {0,  1,  2,     3,      -1,
                                     -7, 16, kHuge, -kHuge, 1000};
  auto pick = [&](const std::vector<int64_t>& values) {
    return values[random() % values.size()];
  };
  int with_errors = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    Program program = clean;
    for (int edit = 1 + random() % 3; edit > 0; --edit) {
      bool in_module = random() % 4 == 0;
      Method& graph = in_module ? program.modules[0].graph : program.methods[0];
      int32_t n = static_cast<int32_t>(graph.nodes.size());
      int32_t i = static_cast<int32_t>(random() % (n - 1));  // not the output
      Node& node = graph.nodes[i];
      TensorSpec* spec = node.MutableSpec(
          node.result == ResultKind::kTuple
              ? static_cast<int32_t>(random() % (node.tuple.size() + 1)) - 1
              : -1);
      switch (random() % 9) {
        case 0:
          if (spec && !spec->sizes.empty()) {
            spec->sizes[random() % spec->sizes.size()] = pick(pool);
          }
          break;
        case 1:
          if (spec) spec->sizes.push_back(pick(pool));
          break;
        case 2:
          if (spec) spec->strides.assign(random() % 4, pick(pool));
          break;
        case 3:
          if (spec) spec->storage_offset = pick(pool);
          if (spec && random() % 2) spec->dtype = DType(random() % 11);
          break;
        case 4:
          if (!node.args.empty()) {
            Argument& arg = node.args[random() % node.args.size()];
            arg.kind = ArgKind(random() % 9);
            arg.int_value = pick(pool);
            arg.ints = {pick(pool), pick(pool)};
            arg.value = ValueId{static_cast<int32_t>(random() % (i + 1)) - 1,
                                static_cast<int32_t>(random() % 4) - 1};
            if (arg.value.node < 0) arg.value.node = 0;
            arg.values = {arg.value};
          }
          break;
        case 5:
          if (!node.args.empty() && random() % 2) {
            node.args.pop_back();
          } else {
            node.args.push_back(node.args.empty() ? Argument{}
                                                  : node.args.back());
          }
          break;
        case 6:
          node.result = ResultKind(random() % 4);
          node.scalar = ScalarType(random() % 4);
          break;
        case 7:
          program.modules[0].returns_tuple = random() % 2;
          if (random() % 2 && !program.modules[0].input_layouts.empty()) {
            program.modules[0].input_layouts.pop_back();
          }
          break;
        default:
          program.modules[0].compile_specs[0].value =
              random() % 2 ? "cuda:-3" : "CUDA:7";
          program.modules[0].ResolveTargetDevice();
          if (spec) spec->SetDevice(Device::Cuda(int32_t(pick(pool) % 5)));
          break;
      }
    }
    Diagnostics diagnostics;
    ValidateProgram(program, diagnostics);
    with_errors += diagnostics.HasErrors();
  }
  EXPECT_GT(with_errors, 1000);
}

}  // namespace
}  // namespace ferry
