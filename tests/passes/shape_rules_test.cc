// Shape rules: argument binding, type matching, broadcasting and the result
// specs of each rule kind, on small in-memory graphs.
#include "passes/shape_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "passes/ir.h"
#include "passes/schema.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using Sizes = std::vector<int64_t>;

// --- Building calls
// --------------------------------------------------------------

Argument V(ValueId v) { return Argument::Value(v); }
Argument I(int64_t value) {
  Argument a;
  a.kind = ArgKind::kInt;
  a.int_value = value;
  return a;
}
Argument F(double value) {
  Argument a;
  a.kind = ArgKind::kFloat;
  a.float_value = value;
  return a;
}
Argument B(bool value) {
  Argument a;
  a.kind = ArgKind::kBool;
  a.bool_value = value;
  return a;
}
Argument Ints(std::vector<int64_t> values) {
  Argument a;
  a.kind = ArgKind::kInts;
  a.ints = std::move(values);
  return a;
}
Argument None() { return Argument{}; }
Argument DTypeArg(DType dtype) {
  Argument a;
  a.kind = ArgKind::kDType;
  a.dtype = dtype;
  return a;
}
Argument Values(std::vector<ValueId> values) {
  Argument a;
  a.kind = ArgKind::kValueList;
  a.values = std::move(values);
  return a;
}
Argument Named(std::string name, Argument a) {
  a.name = std::move(name);
  return a;
}

class Graph {
 public:
  ValueId Tensor(DType dtype, Sizes sizes, Sizes strides = {},
                 int64_t offset = 0) {
    Node node;
    node.name = "t" + std::to_string(method_.nodes.size());
    node.kind = NodeKind::kInput;
    node.input_kind = InputKind::kUserInput;
    node.result = ResultKind::kTensor;
    node.tensor.dtype = dtype;
    node.tensor.sizes = std::move(sizes);
    node.tensor.strides = std::move(strides);
    node.tensor.storage_offset = offset;
    method_.nodes.push_back(std::move(node));
    return ValueId{static_cast<int32_t>(method_.nodes.size()) - 1, -1};
  }
  ValueId F32(Sizes sizes, Sizes strides = {}, int64_t offset = 0) {
    return Tensor(DType::kF32, std::move(sizes), std::move(strides), offset);
  }
  ValueId IntScalar() {
    Node node;
    node.name = "n" + std::to_string(method_.nodes.size());
    node.kind = NodeKind::kCall;
    node.result = ResultKind::kScalar;
    node.scalar = ScalarType::kInt;
    method_.nodes.push_back(std::move(node));
    return ValueId{static_cast<int32_t>(method_.nodes.size()) - 1, -1};
  }

  absl::StatusOr<std::vector<TensorSpec>> Infer(const std::string& op,
                                                std::vector<Argument> args) {
    const OpInfo* info = LookupOp(op);
    if (info == nullptr) return absl::NotFoundError(op);
    Node call;
    call.name = "call";
    call.kind = NodeKind::kCall;
    call.target = op;
    call.schema = info->schema;
    call.args = std::move(args);
    return InferBothWays(*info, call);
  }

  // A call whose node declares a tuple of `declared` results (rules that
  // accept either of two ATen answers read it).
  absl::StatusOr<std::vector<TensorSpec>> InferDeclared(
      const std::string& op, std::vector<Argument> args,
      std::vector<TensorSpec> declared) {
    const OpInfo* info = LookupOp(op);
    if (info == nullptr) return absl::NotFoundError(op);
    Node call;
    call.name = "call";
    call.kind = NodeKind::kCall;
    call.target = op;
    call.schema = info->schema;
    call.args = std::move(args);
    call.result = ResultKind::kTuple;
    call.tuple = std::move(declared);
    return InferBothWays(*info, call);
  }

  // InferResultSpecs; and, for a call validation hands over already bound
  // (every argument of its parameter's type, every operand's spec sound),
  // InferBoundResultSpecs too, which must answer the same.
  absl::StatusOr<std::vector<TensorSpec>> InferBothWays(const OpInfo& info,
                                                        const Node& call) {
    absl::StatusOr<std::vector<TensorSpec>> specs =
        InferResultSpecs(info, method_, call);
    absl::StatusOr<BoundArguments> bound =
        BindArguments(*info.schema, call.args);
    bool ready = bound.ok();
    for (size_t i = 0; ready && i < bound->size(); ++i) {
      ready = (*bound)[i] == nullptr ||
              ArgumentMatchesType(method_, *(*bound)[i],
                                  info.schema->arguments[i].type);
    }
    ForEachOperand(call, [&](ValueId v) {
      const TensorSpec* spec = method_.Spec(v);
      if (spec != nullptr && !spec->StorageBytes().has_value()) ready = false;
    });
    if (!ready) return specs;
    ++bound_inferences_;
    absl::StatusOr<std::vector<TensorSpec>> again =
        InferBoundResultSpecs(info, method_, call, *std::move(bound));
    EXPECT_EQ(again.status(), specs.status()) << call.target;
    if (again.ok() && specs.ok()) {
      EXPECT_EQ(again->size(), specs->size()) << call.target;
      for (size_t r = 0; r < std::min(again->size(), specs->size()); ++r) {
        const TensorSpec& a = (*again)[r];
        const TensorSpec& b = (*specs)[r];
        EXPECT_TRUE(a.dtype == b.dtype && a.sizes == b.sizes &&
                    a.Strides() == b.Strides() &&
                    a.storage_offset == b.storage_offset)
            << call.target << " result " << r << ": " << SpecText(a) << " vs "
            << SpecText(b);
      }
    }
    return specs;
  }

  // The one result of a call that must succeed.
  TensorSpec One(const std::string& op, std::vector<Argument> args) {
    absl::StatusOr<std::vector<TensorSpec>> specs = Infer(op, std::move(args));
    EXPECT_TRUE(specs.ok()) << op << ": " << specs.status();
    if (!specs.ok() || specs->size() != 1) return TensorSpec{};
    return (*specs)[0];
  }

  // The message of a call that must fail with InvalidArgument.
  std::string Error(const std::string& op, std::vector<Argument> args) {
    absl::StatusOr<std::vector<TensorSpec>> specs = Infer(op, std::move(args));
    EXPECT_FALSE(specs.ok()) << op;
    if (specs.ok()) return "";
    EXPECT_EQ(specs.status().code(), absl::StatusCode::kInvalidArgument)
        << specs.status();
    return std::string(specs.status().message());
  }

  const Method& method() const { return method_; }
  // How many calls InferBothWays checked both ways.
  int bound_inferences() const { return bound_inferences_; }

 private:
  Method method_;
  int bound_inferences_ = 0;
};

// A view result: sizes, strides (as read by Strides()) and offset.
struct Layout {
  Sizes sizes;
  Sizes strides;
  int64_t offset;
};
Layout LayoutOf(const TensorSpec& spec) {
  return {spec.sizes, spec.Strides(), spec.storage_offset};
}
MATCHER_P3(IsLayout, sizes, strides, offset, "") {
  Layout layout = LayoutOf(arg);
  *result_listener << "sizes " << ShapeText(layout.sizes) << " strides "
                   << ShapeText(layout.strides) << " offset " << layout.offset;
  return layout.sizes == Sizes(sizes) && layout.strides == Sizes(strides) &&
         layout.offset == offset;
}

// --- Helpers of the header
// -----------------------------------------------------------

TEST(BroadcastShapesTest, FollowsATen) {
  auto broadcast = [](std::vector<int64_t> a, std::vector<int64_t> b) {
    return BroadcastShapes(a, b);
  };
  EXPECT_EQ(broadcast({2, 1, 3}, {4, 3}), Sizes({2, 4, 3}));
  EXPECT_EQ(broadcast({}, {4, 3}), Sizes({4, 3}));
  EXPECT_EQ(broadcast({0, 1}, {1, 5}), Sizes({0, 5}));
  EXPECT_EQ(broadcast({1}, {0}), Sizes({0}));
  EXPECT_EQ(broadcast({2, 3}, {3, 2}), std::nullopt);
  EXPECT_EQ(broadcast({2}, {0}), std::nullopt);
}

TEST(TextTest, SpecsAndTypes) {
  TensorSpec spec;
  spec.dtype = DType::kF32;
  spec.sizes = {2, 3};
  EXPECT_EQ(SpecText(spec), "f32[2,3]");
  spec.sizes.clear();
  EXPECT_EQ(SpecText(spec), "f32[]");
  OpSchema schema = *ParseSchema(
      "x::f(Tensor a, int[2]? b, Tensor?[] c, Scalar d, SymInt[] e) -> Tensor");
  EXPECT_EQ(TypeText(schema.arguments[0].type), "Tensor");
  EXPECT_EQ(TypeText(schema.arguments[1].type), "int[2]?");
  EXPECT_EQ(TypeText(schema.arguments[2].type), "Tensor[]");
  EXPECT_EQ(TypeText(schema.arguments[3].type), "Scalar");
  EXPECT_EQ(TypeText(schema.arguments[4].type), "int[]");
}

TEST(BindArgumentsTest, PositionalKeywordAndDefaults) {
  const OpSchema& add = *LookupOp("aten::add.Tensor")->schema;
  std::vector<Argument> args = {I(0), I(1)};
  absl::StatusOr<BoundArguments> bound = BindArguments(add, args);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ((*bound)[0], &args[0]);
  EXPECT_EQ((*bound)[1], &args[1]);
  EXPECT_EQ((*bound)[2], nullptr);  // alpha: its default

  args = {Named("other", I(1)), I(0), Named("alpha", I(2))};
  bound = BindArguments(add, args);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ((*bound)[0], &args[1]);
  EXPECT_EQ((*bound)[1], &args[0]);
  EXPECT_EQ((*bound)[2], &args[2]);

  // A keyword-only parameter may be passed by position (serialized graphs).
  args = {I(0), I(1), I(2)};
  EXPECT_TRUE(BindArguments(add, args).ok());
}

TEST(BindArgumentsTest, Errors) {
  const OpSchema& relu = *LookupOp("aten::relu")->schema;
  const OpSchema& add = *LookupOp("aten::add.Tensor")->schema;
  std::vector<Argument> two = {I(0), I(1)};
  EXPECT_EQ(BindArguments(relu, two).status().message(),
            "'aten::relu' takes 1 argument, got 2 positional");
  std::vector<Argument> unknown = {I(0), Named("bogus", I(1))};
  EXPECT_EQ(BindArguments(relu, unknown).status().message(),
            "'aten::relu' has no parameter called 'bogus'");
  std::vector<Argument> twice = {I(0), Named("self", I(1))};
  EXPECT_EQ(BindArguments(relu, twice).status().message(),
            "argument 'self' of 'aten::relu' is given twice");
  std::vector<Argument> missing = {I(0)};
  EXPECT_EQ(BindArguments(add, missing).status().message(),
            "'aten::add.Tensor' is missing argument 'other'");
}

TEST(ArgumentMatchesTypeTest, ValuesScalarsAndLists) {
  Graph g;
  ValueId x = g.F32({2});
  ValueId n = g.IntScalar();
  auto type = [](const std::string& text) {
    return ParseSchema("x::f(" + text + " a) -> Tensor")->arguments[0].type;
  };
  const Method& m = g.method();
  EXPECT_TRUE(ArgumentMatchesType(m, V(x), type("Tensor")));
  EXPECT_FALSE(ArgumentMatchesType(m, V(x), type("int")));
  EXPECT_FALSE(ArgumentMatchesType(m, I(1), type("Tensor")));
  EXPECT_TRUE(ArgumentMatchesType(m, V(n), type("SymInt")));
  EXPECT_TRUE(ArgumentMatchesType(m, V(n), type("Scalar")));
  EXPECT_FALSE(ArgumentMatchesType(m, V(n), type("Tensor")));
  EXPECT_TRUE(ArgumentMatchesType(m, None(), type("Tensor?")));
  EXPECT_FALSE(ArgumentMatchesType(m, None(), type("Tensor")));
  EXPECT_TRUE(ArgumentMatchesType(m, I(1), type("float")));
  EXPECT_FALSE(ArgumentMatchesType(m, F(1.5), type("int")));
  EXPECT_TRUE(ArgumentMatchesType(m, B(true), type("Scalar")));
  EXPECT_TRUE(ArgumentMatchesType(m, Ints({1, 2}), type("int[]")));
  EXPECT_TRUE(ArgumentMatchesType(m, Ints({1, 2}), type("int[1]")));
  EXPECT_FALSE(ArgumentMatchesType(m, Ints({1, 2}), type("float")));
  EXPECT_TRUE(ArgumentMatchesType(m, I(1), type("int[1]")));
  EXPECT_TRUE(ArgumentMatchesType(m, Ints({}), type("Tensor[]")));
  EXPECT_TRUE(ArgumentMatchesType(m, Values({x, x}), type("Tensor[]")));
  EXPECT_FALSE(ArgumentMatchesType(m, Values({x, n}), type("Tensor[]")));
  EXPECT_TRUE(ArgumentMatchesType(m, Values({n, n}), type("SymInt[]")));
  EXPECT_TRUE(
      ArgumentMatchesType(m, DTypeArg(DType::kF16), type("ScalarType?")));
  EXPECT_FALSE(ArgumentMatchesType(m, DTypeArg(DType::kF16), type("int")));
  EXPECT_TRUE(ArgumentMatchesType(m, I(3), type("Generator?")));  // Any
}

// --- kElementwise
// --------------------------------------------------------------------

TEST(ElementwiseTest, Broadcasts) {
  Graph g;
  ValueId a = g.F32({2, 1, 3});
  ValueId b = g.F32({4, 3});
  TensorSpec out = g.One("aten::add.Tensor", {V(a), V(b)});
  EXPECT_EQ(out.sizes, Sizes({2, 4, 3}));
  EXPECT_EQ(out.dtype, DType::kF32);
  EXPECT_THAT(out.strides, IsEmpty());  // fresh: contiguous
  EXPECT_EQ(g.Error("aten::mul.Tensor", {V(g.F32({2, 3})), V(g.F32({3, 2}))}),
            "aten::mul.Tensor of f32[2,3] and f32[3,2]: sizes [2,3] and [3,2] "
            "do not broadcast");
}

TEST(ElementwiseTest, TypePromotion) {
  Graph g;
  ValueId f32 = g.F32({3});
  ValueId i32 = g.Tensor(DType::kI32, {3});
  ValueId f16 = g.Tensor(DType::kF16, {3});
  ValueId b = g.Tensor(DType::kBool, {3});
  ValueId u8 = g.Tensor(DType::kU8, {3});
  ValueId i8 = g.Tensor(DType::kI8, {3});
  ValueId f64_0d = g.Tensor(DType::kF64, {});
  ValueId bf16 = g.Tensor(DType::kBF16, {3});
  auto dtype = [&](const std::string& op, std::vector<Argument> args) {
    return g.One(op, std::move(args)).dtype;
  };
  EXPECT_EQ(dtype("aten::add.Tensor", {V(i32), V(f32)}), DType::kF32);
  EXPECT_EQ(dtype("aten::add.Scalar", {V(i32), I(2)}), DType::kI32);
  EXPECT_EQ(dtype("aten::add.Scalar", {V(i32), F(2.5)}), DType::kF32);
  EXPECT_EQ(dtype("aten::mul.Scalar", {V(f16), F(2.5)}), DType::kF16);
  EXPECT_EQ(dtype("aten::mul.Scalar", {V(b), I(2)}), DType::kI64);
  EXPECT_EQ(dtype("aten::mul.Scalar", {V(b), B(true)}), DType::kBool);
  // alpha scales; it never promotes.
  EXPECT_EQ(dtype("aten::add.Scalar", {V(i32), I(1), F(0.5)}), DType::kI32);
  // A 0-dim tensor decides only when of a higher category.
  EXPECT_EQ(dtype("aten::add.Tensor", {V(f32), V(f64_0d)}), DType::kF32);
  EXPECT_EQ(dtype("aten::add.Tensor", {V(i32), V(f64_0d)}), DType::kF64);
  EXPECT_EQ(dtype("aten::add.Tensor", {V(u8), V(i8)}), DType::kI16);
  EXPECT_EQ(dtype("aten::add.Tensor", {V(f16), V(bf16)}), DType::kF32);
  EXPECT_EQ(dtype("aten::add.Tensor", {V(b), V(b)}), DType::kBool);
  // True division and transcendental functions compute in float.
  EXPECT_EQ(dtype("aten::div.Tensor", {V(i32), V(i32)}), DType::kF32);
  EXPECT_EQ(dtype("aten::div.Scalar", {V(i32), I(2)}), DType::kF32);
  EXPECT_EQ(dtype("aten::sin", {V(i32)}), DType::kF32);
  EXPECT_EQ(dtype("aten::sigmoid", {V(f16)}), DType::kF16);
  EXPECT_EQ(dtype("aten::relu", {V(i32)}), DType::kI32);
  EXPECT_EQ(dtype("aten::neg", {V(f16)}), DType::kF16);
}

TEST(ElementwiseTest, InPlaceResultIsSelfExactly) {
  Graph g;
  // A transposed view at an offset, written in place.
  ValueId v = g.F32({4, 4}, {1, 4}, 2);
  EXPECT_THAT(g.One("aten::relu_", {V(v)}),
              IsLayout(Sizes{4, 4}, Sizes{1, 4}, 2));
  ValueId row = g.F32({4});
  EXPECT_THAT(g.One("aten::add_.Tensor", {V(v), V(row)}),
              IsLayout(Sizes{4, 4}, Sizes{1, 4}, 2));
  EXPECT_THAT(g.One("aten::mul_.Scalar", {V(v), F(3.0)}),
              IsLayout(Sizes{4, 4}, Sizes{1, 4}, 2));
}

TEST(ElementwiseTest, InPlaceCannotResizeOrNarrow) {
  Graph g;
  ValueId small = g.F32({4});
  ValueId big = g.F32({4, 4});
  EXPECT_EQ(g.Error("aten::add_.Tensor", {V(small), V(big)}),
            "aten::add_.Tensor of f32[4] and f32[4,4]: the result's sizes "
            "[4,4] differ from [4] of the tensor written in place");
  ValueId ints = g.Tensor(DType::kI64, {4});
  absl::StatusOr<std::vector<TensorSpec>> narrowed =
      g.Infer("aten::add_.Tensor", {V(ints), V(small)});
  ASSERT_FALSE(narrowed.ok());
  EXPECT_TRUE(IsDTypeError(narrowed.status()));
  EXPECT_THAT(std::string(narrowed.status().message()),
              HasSubstr("the result's dtype f32 cannot be written in place "
                        "into i64"));
  // An int scalar keeps an int tensor int.
  EXPECT_EQ(g.One("aten::add_.Scalar", {V(ints), I(1)}).dtype, DType::kI64);
}

// --- kSameAsSelf
// ------------------------------------------------------------------------

TEST(SameAsSelfTest, FreshResultsAreContiguous) {
  Graph g;
  ValueId t = g.F32({3, 4}, {1, 3}, 5);
  TensorSpec clone = g.One("aten::clone", {V(t)});
  EXPECT_THAT(clone, IsLayout(Sizes{3, 4}, Sizes{4, 1}, 0));
  TensorSpec h2d = g.One(std::string(kH2DCopyOp), {V(t)});
  EXPECT_EQ(h2d.sizes, Sizes({3, 4}));
  EXPECT_EQ(g.One(std::string(kD2HCopyOp), {V(t)}).dtype, DType::kF32);
}

TEST(SameAsSelfTest, Softmax) {
  Graph g;
  ValueId half = g.Tensor(DType::kF16, {2, 5});
  EXPECT_EQ(g.One("aten::_softmax", {V(half), I(-1), B(false)}).dtype,
            DType::kF16);
  EXPECT_EQ(g.One("aten::_softmax", {V(half), I(1), B(true)}).dtype,
            DType::kF32);
  EXPECT_EQ(g.Error("aten::_softmax", {V(half), I(2), B(false)}),
            "aten::_softmax of f16[2,5]: dim 2 is out of range for a 2-D "
            "tensor (expected a dim in [-2, 1])");
}

TEST(SameAsSelfTest, CopyAndFillInPlace) {
  Graph g;
  ValueId self = g.F32({4, 4}, {1, 4});
  ValueId row = g.Tensor(DType::kI64, {4});
  EXPECT_THAT(g.One("aten::copy_", {V(self), V(row)}),
              IsLayout(Sizes{4, 4}, Sizes{1, 4}, 0));
  EXPECT_THAT(g.Error("aten::copy_", {V(self), V(g.F32({3}))}),
              HasSubstr("sizes [3] do not broadcast to [4,4]"));
  EXPECT_THAT(g.One("aten::fill_.Scalar", {V(self), F(0.5)}),
              IsLayout(Sizes{4, 4}, Sizes{1, 4}, 0));
}

// --- kMatmul
// ------------------------------------------------------------------------------

TEST(MatmulTest, Mm) {
  Graph g;
  ValueId a = g.F32({2, 3});
  EXPECT_EQ(g.One("aten::mm", {V(a), V(g.F32({3, 5}))}).sizes, Sizes({2, 5}));
  EXPECT_EQ(g.Error("aten::mm", {V(a), V(g.F32({4, 5}))}),
            "aten::mm of f32[2,3] and f32[4,5]: inner dimensions 3 and 4 "
            "differ");
  EXPECT_EQ(g.Error("aten::mm", {V(a), V(g.F32({3}))}),
            "aten::mm of f32[2,3] and f32[3]: 'mat2' must be 2-D, not 1-D");
  absl::StatusOr<std::vector<TensorSpec>> mixed =
      g.Infer("aten::mm", {V(a), V(g.Tensor(DType::kF16, {3, 2}))});
  ASSERT_FALSE(mixed.ok());
  EXPECT_TRUE(IsDTypeError(mixed.status()));
  EXPECT_EQ(mixed.status().message(),
            "aten::mm of f32[2,3] and f16[3,2]: operands have different "
            "dtypes f32 and f16");
}

TEST(MatmulTest, BmmAddmmLinear) {
  Graph g;
  EXPECT_EQ(
      g.One("aten::bmm", {V(g.F32({7, 2, 3})), V(g.F32({7, 3, 4}))}).sizes,
      Sizes({7, 2, 4}));
  EXPECT_THAT(g.Error("aten::bmm", {V(g.F32({7, 2, 3})), V(g.F32({6, 3, 4}))}),
              HasSubstr("batch sizes 7 and 6 differ"));
  ValueId mat1 = g.F32({2, 3});
  ValueId mat2 = g.F32({3, 4});
  EXPECT_EQ(g.One("aten::addmm", {V(g.F32({4})), V(mat1), V(mat2)}).sizes,
            Sizes({2, 4}));
  EXPECT_EQ(g.One("aten::addmm", {V(g.F32({2, 4})), V(mat1), V(mat2), F(0.5),
                                  Named("alpha", I(2))})
                .sizes,
            Sizes({2, 4}));
  EXPECT_THAT(g.Error("aten::addmm", {V(g.F32({3})), V(mat1), V(mat2)}),
              HasSubstr("'self' of sizes [3] does not broadcast to [2,4]"));

  ValueId input = g.F32({5, 2, 3});
  ValueId weight = g.F32({8, 3});
  EXPECT_EQ(g.One("aten::linear", {V(input), V(weight)}).sizes,
            Sizes({5, 2, 8}));
  EXPECT_EQ(g.One("aten::linear", {V(input), V(weight), None()}).sizes,
            Sizes({5, 2, 8}));
  EXPECT_EQ(g.One("aten::linear", {V(input), V(weight), V(g.F32({8}))}).sizes,
            Sizes({5, 2, 8}));
  EXPECT_THAT(g.Error("aten::linear", {V(input), V(g.F32({8, 4}))}),
              HasSubstr("input features 3 and weight features 4 differ"));
  EXPECT_THAT(g.Error("aten::linear", {V(input), V(weight), V(g.F32({7}))}),
              HasSubstr("'bias' of sizes [7] does not broadcast to [5,2,8]"));
}

// --- kView
// ----------------------------------------------------------------------------------

TEST(ViewTest, TransposePermuteT) {
  Graph g;
  ValueId x = g.F32({2, 3, 4});
  EXPECT_THAT(g.One("aten::transpose.int", {V(x), I(0), I(-1)}),
              IsLayout(Sizes{4, 3, 2}, Sizes{1, 4, 12}, 0));
  EXPECT_THAT(g.One("aten::permute", {V(x), Ints({2, 0, 1})}),
              IsLayout(Sizes{4, 2, 3}, Sizes{1, 12, 4}, 0));
  EXPECT_THAT(g.Error("aten::permute", {V(x), Ints({0, 0, 1})}),
              HasSubstr("dim 0 appears more than once in dims"));
  EXPECT_THAT(g.Error("aten::permute", {V(x), Ints({0, 1})}),
              HasSubstr("are not a permutation of the 3 dims of self"));
  EXPECT_THAT(g.Error("aten::transpose.int", {V(x), I(0), I(3)}),
              HasSubstr("dim 3 is out of range for a 3-D tensor"));
  ValueId m = g.F32({3, 5}, {1, 3}, 7);
  EXPECT_THAT(g.One("aten::t", {V(m)}), IsLayout(Sizes{5, 3}, Sizes{3, 1}, 7));
  ValueId v = g.F32({5});
  EXPECT_THAT(g.One("aten::t", {V(v)}), IsLayout(Sizes{5}, Sizes{1}, 0));
  EXPECT_THAT(g.Error("aten::t", {V(x)}),
              HasSubstr("self must be at most 2-D, not 3-D"));
  ValueId scalar = g.F32({});
  EXPECT_THAT(g.One("aten::transpose.int", {V(scalar), I(0), I(-1)}),
              IsLayout(Sizes{}, Sizes{}, 0));
}

TEST(ViewTest, Expand) {
  Graph g;
  ValueId x = g.F32({3, 1}, {1, 1}, 4);
  EXPECT_THAT(g.One("aten::expand", {V(x), Ints({2, 3, 5})}),
              IsLayout(Sizes{2, 3, 5}, Sizes{0, 1, 0}, 4));
  EXPECT_THAT(g.One("aten::expand", {V(x), Ints({-1, 6})}),
              IsLayout(Sizes{3, 6}, Sizes{1, 0}, 4));
  EXPECT_THAT(g.Error("aten::expand", {V(x), Ints({4, 1})}),
              HasSubstr("the expanded size 4 must match the existing size 3 "
                        "at non-singleton dim 0"));
  EXPECT_THAT(g.Error("aten::expand", {V(x), Ints({-1, 3, 1})}),
              HasSubstr("size -1 is not allowed in the new leading dim 0"));
  EXPECT_THAT(g.Error("aten::expand", {V(x), Ints({3})}),
              HasSubstr("has fewer dims than self"));
}

TEST(ViewTest, SliceClampsAndStepsOverNonContiguousInput) {
  Graph g;
  // The transpose of a contiguous [6,4]: sizes [4,6], strides [1,4].
  ValueId x = g.F32({4, 6}, {1, 4}, 0);
  EXPECT_THAT(g.One("aten::slice.Tensor", {V(x), I(1), I(1), I(5), I(2)}),
              IsLayout(Sizes{4, 2}, Sizes{1, 8}, 4));
  // Defaults: dim 0, whole range, step 1.
  EXPECT_THAT(g.One("aten::slice.Tensor", {V(x)}),
              IsLayout(Sizes{4, 6}, Sizes{1, 4}, 0));
  // Negative start; an end past the size (as exported graphs write INT64_MAX).
  EXPECT_THAT(
      g.One("aten::slice.Tensor",
            {V(x), I(-1), I(-4), I(std::numeric_limits<int64_t>::max()), I(3)}),
      IsLayout(Sizes{4, 2}, Sizes{1, 12}, 8));
  // An empty slice when end < start; clamped start.
  EXPECT_THAT(g.One("aten::slice.Tensor", {V(x), I(0), I(3), I(1)}),
              IsLayout(Sizes{0, 6}, Sizes{1, 4}, 3));
  EXPECT_THAT(g.One("aten::slice.Tensor", {V(x), I(0), I(-100), I(100)}),
              IsLayout(Sizes{4, 6}, Sizes{1, 4}, 0));
  EXPECT_THAT(g.Error("aten::slice.Tensor", {V(x), I(0), None(), None(), I(0)}),
              HasSubstr("slice step must be positive, not 0"));
  EXPECT_THAT(g.Error("aten::slice.Tensor", {V(g.F32({}))}),
              HasSubstr("cannot slice a 0-dim tensor"));
}

TEST(ViewTest, Select) {
  Graph g;
  ValueId x = g.F32({4, 6}, {1, 4}, 3);
  EXPECT_THAT(g.One("aten::select.int", {V(x), I(1), I(2)}),
              IsLayout(Sizes{4}, Sizes{1}, 11));
  EXPECT_THAT(g.One("aten::select.int", {V(x), I(0), I(-1)}),
              IsLayout(Sizes{6}, Sizes{4}, 6));
  EXPECT_THAT(g.Error("aten::select.int", {V(x), I(0), I(4)}),
              HasSubstr("index 4 is out of range for dim 0 of size 4"));
  EXPECT_THAT(g.Error("aten::select.int", {V(x), I(0), I(-5)}),
              HasSubstr("index -5 is out of range"));
}

TEST(ViewTest, UnsqueezeSqueezeAlias) {
  Graph g;
  ValueId x = g.F32({3, 4}, {1, 3});
  EXPECT_THAT(g.One("aten::unsqueeze", {V(x), I(0)}),
              IsLayout(Sizes{1, 3, 4}, Sizes{3, 1, 3}, 0));
  EXPECT_THAT(g.One("aten::unsqueeze", {V(x), I(1)}),
              IsLayout(Sizes{3, 1, 4}, Sizes{1, 12, 3}, 0));
  EXPECT_THAT(g.One("aten::unsqueeze", {V(x), I(-1)}),
              IsLayout(Sizes{3, 4, 1}, Sizes{1, 3, 1}, 0));
  EXPECT_THAT(g.Error("aten::unsqueeze", {V(x), I(3)}),
              HasSubstr("dim 3 is out of range for a 3-D tensor"));
  ValueId y = g.F32({1, 4, 1}, {9, 2, 1}, 1);
  EXPECT_THAT(g.One("aten::squeeze.dim", {V(y), I(-1)}),
              IsLayout(Sizes{1, 4}, Sizes{9, 2}, 1));
  EXPECT_THAT(g.One("aten::squeeze.dim", {V(y), I(1)}),  // not size 1: kept
              IsLayout(Sizes{1, 4, 1}, Sizes{9, 2, 1}, 1));
  EXPECT_THAT(g.One("aten::squeeze", {V(y)}), IsLayout(Sizes{4}, Sizes{2}, 1));
  EXPECT_THAT(g.One("aten::alias", {V(y)}),
              IsLayout(Sizes{1, 4, 1}, Sizes{9, 2, 1}, 1));
}

TEST(ViewTest, ViewAndReshapeComputeStrides) {
  Graph g;
  ValueId x = g.F32({2, 3, 4});
  EXPECT_THAT(g.One("aten::view", {V(x), Ints({6, -1})}),
              IsLayout(Sizes{6, 4}, Sizes{4, 1}, 0));
  EXPECT_THAT(g.One("aten::reshape", {V(x), Ints({24})}),
              IsLayout(Sizes{24}, Sizes{1}, 0));
  // Rows 1..2 of a [4,6] matrix are contiguous: viewable, offset kept.
  ValueId rows = g.F32({2, 6}, {6, 1}, 6);
  EXPECT_THAT(g.One("aten::view", {V(rows), Ints({12})}),
              IsLayout(Sizes{12}, Sizes{1}, 6));
  // A transposed [3,4] (strides [1,3]) splits its dims but cannot merge them.
  ValueId t = g.F32({3, 4}, {1, 3});
  EXPECT_THAT(g.One("aten::view", {V(t), Ints({3, 2, 2})}),
              IsLayout(Sizes{3, 2, 2}, Sizes{1, 6, 3}, 0));
  EXPECT_THAT(g.One("aten::view", {V(t), Ints({1, 3, 1, 4})}),
              IsLayout(Sizes{1, 3, 1, 4}, Sizes{3, 1, 12, 3}, 0));
  ValueId scalar = g.F32({});
  EXPECT_THAT(g.One("aten::view", {V(scalar), Ints({1, 1})}),
              IsLayout(Sizes{1, 1}, Sizes{1, 1}, 0));
  ValueId empty = g.F32({0, 3});
  EXPECT_EQ(g.One("aten::view", {V(empty), Ints({3, 0})}).sizes, Sizes({3, 0}));
}

TEST(ViewTest, ImpossibleViewsAreRefused) {
  Graph g;
  ValueId t = g.F32({3, 4}, {1, 3});
  EXPECT_EQ(g.Error("aten::view", {V(t), Ints({12})}),
            "aten::view of f32[3,4]: view is not compatible with input strides "
            "[1,3] (size [12]); make the input contiguous or use view_copy");
  // Columns 0..2 of a [4,6] matrix: rows are not adjacent.
  ValueId cols = g.F32({4, 3}, {6, 1});
  EXPECT_THAT(g.Error("aten::view", {V(cols), Ints({12})}),
              HasSubstr("view is not compatible with input strides"));
  EXPECT_THAT(g.Error("aten::view", {V(g.F32({2, 3})), Ints({4, -1})}),
              HasSubstr("size [4,-1] is invalid for 6 elements"));
  EXPECT_THAT(g.Error("aten::view", {V(g.F32({2, 3})), Ints({-1, -1})}),
              HasSubstr("only one dimension can be -1"));
  EXPECT_THAT(g.Error("aten::view", {V(g.F32({0, 3})), Ints({-1, 0})}),
              HasSubstr("cannot infer dim 0 of a tensor with 0 elements"));
  EXPECT_THAT(g.Error("aten::view", {V(g.F32({2, 3})), Ints({7})}),
              HasSubstr("size [7] is invalid for 6 elements"));
}

// --- kCopy
// ----------------------------------------------------------------------------------

TEST(CopyTest, ViewSizesInFreshContiguousStorage) {
  Graph g;
  ValueId t = g.F32({3, 4}, {1, 3}, 5);
  EXPECT_THAT(g.One("aten::transpose_copy.int", {V(t), I(0), I(1)}),
              IsLayout(Sizes{4, 3}, Sizes{3, 1}, 0));
  // view_copy of a non-viewable input copies (as ATen's reshape fallback).
  EXPECT_THAT(g.One("aten::view_copy", {V(t), Ints({12})}),
              IsLayout(Sizes{12}, Sizes{1}, 0));
  EXPECT_THAT(g.One("aten::select_copy.int", {V(t), I(1), I(-1)}),
              IsLayout(Sizes{3}, Sizes{1}, 0));
  EXPECT_THAT(g.One("aten::slice_copy.Tensor", {V(t), I(1), I(1)}),
              IsLayout(Sizes{3, 3}, Sizes{3, 1}, 0));
  EXPECT_EQ(g.One("aten::expand_copy", {V(g.F32({1, 4})), Ints({2, 4})}).sizes,
            Sizes({2, 4}));
  EXPECT_EQ(g.One("aten::permute_copy", {V(t), Ints({1, 0})}).sizes,
            Sizes({4, 3}));
  EXPECT_EQ(g.One("aten::t_copy", {V(t)}).sizes, Sizes({4, 3}));
  EXPECT_EQ(g.One("aten::unsqueeze_copy", {V(t), I(0)}).sizes,
            Sizes({1, 3, 4}));
  EXPECT_EQ(g.One("aten::squeeze_copy.dim", {V(g.F32({3, 1})), I(1)}).sizes,
            Sizes({3}));
  EXPECT_THAT(g.One("aten::alias_copy", {V(t)}),
              IsLayout(Sizes{3, 4}, Sizes{4, 1}, 0));
}

// --- kReduction
// -------------------------------------------------------------------------------

TEST(ReductionTest, DimsKeepdimAndDtypes) {
  Graph g;
  ValueId x = g.F32({2, 3, 4});
  EXPECT_EQ(g.One("aten::sum.dim_IntList", {V(x), Ints({1})}).sizes,
            Sizes({2, 4}));
  EXPECT_EQ(
      g.One("aten::sum.dim_IntList", {V(x), Ints({-1, 0}), B(true)}).sizes,
      Sizes({1, 3, 1}));
  EXPECT_EQ(g.One("aten::sum.dim_IntList", {V(x), None()}).sizes, Sizes({}));
  EXPECT_EQ(
      g.One("aten::mean.dim", {V(x), I(-2), Named("keepdim", B(true))}).sizes,
      Sizes({2, 1, 4}));
  // amax's `int[1] dim=[]`: every dim.
  EXPECT_EQ(g.One("aten::amax", {V(x)}).sizes, Sizes({}));
  EXPECT_EQ(g.One("aten::amax", {V(x), Ints({2}), B(true)}).sizes,
            Sizes({2, 3, 1}));

  ValueId ints = g.Tensor(DType::kI32, {5});
  EXPECT_EQ(g.One("aten::sum.dim_IntList", {V(ints), Ints({0})}).dtype,
            DType::kI64);
  EXPECT_EQ(g.One("aten::sum.dim_IntList",
                  {V(ints), Ints({0}), B(false), DTypeArg(DType::kF64)})
                .dtype,
            DType::kF64);
  EXPECT_EQ(g.One("aten::amax", {V(ints), Ints({0})}).dtype, DType::kI32);
  absl::StatusOr<std::vector<TensorSpec>> mean =
      g.Infer("aten::mean.dim", {V(ints), Ints({0})});
  ASSERT_FALSE(mean.ok());
  EXPECT_TRUE(IsDTypeError(mean.status()));

  EXPECT_THAT(g.Error("aten::sum.dim_IntList", {V(x), Ints({1, -2})}),
              HasSubstr("dim -2 appears more than once in dim"));
  EXPECT_THAT(g.Error("aten::amax", {V(x), Ints({3})}),
              HasSubstr("dim 3 is out of range for a 3-D tensor"));
  EXPECT_EQ(g.One("aten::sum.dim_IntList", {V(g.F32({})), Ints({-1})}).sizes,
            Sizes({}));
}

// --- kCat
// ---------------------------------------------------------------------------------------

TEST(CatTest, AlongADim) {
  Graph g;
  ValueId a = g.F32({2, 3});
  ValueId b = g.F32({2, 5});
  EXPECT_EQ(g.One("aten::cat", {Values({a, b}), I(-1)}).sizes, Sizes({2, 8}));
  EXPECT_EQ(g.One("aten::cat", {Values({a, a, a})}).sizes, Sizes({6, 3}));
  EXPECT_EQ(
      g.One("aten::cat", {Values({a, g.Tensor(DType::kI32, {1, 3})})}).dtype,
      DType::kF32);
  // Legacy: 1-D empty tensors are skipped.
  EXPECT_EQ(g.One("aten::cat", {Values({g.F32({0}), a}), I(1)}).sizes,
            Sizes({2, 3}));
  EXPECT_THAT(g.Error("aten::cat", {Values({a, b})}),
              HasSubstr("sizes [2,5] and [2,3] differ in dim 1, which is not "
                        "the concatenated dim 0"));
  EXPECT_THAT(g.Error("aten::cat", {Values({a, g.F32({6})})}),
              HasSubstr("tensor 1 has 1 dims, not 2"));
  EXPECT_THAT(g.Error("aten::cat", {Values({})}),
              HasSubstr("expected at least one tensor"));
}

// --- kLayerNorm
// ----------------------------------------------------------------------------------

TEST(LayerNormTest, OutMeanRstd) {
  Graph g;
  ValueId x = g.F32({2, 3, 4});
  ValueId w = g.F32({4});
  absl::StatusOr<std::vector<TensorSpec>> specs = g.Infer(
      "aten::native_layer_norm", {V(x), Ints({4}), V(w), V(w), F(1e-5)});
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 3u);
  EXPECT_EQ((*specs)[0].sizes, Sizes({2, 3, 4}));
  EXPECT_EQ((*specs)[1].sizes, Sizes({2, 3, 1}));
  EXPECT_EQ((*specs)[2].sizes, Sizes({2, 3, 1}));
  EXPECT_EQ((*specs)[1].dtype, DType::kF32);

  specs = g.Infer("aten::native_layer_norm",
                  {V(x), Ints({3, 4}), None(), None(), F(1e-5)});
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ((*specs)[1].sizes, Sizes({2, 1, 1}));

  EXPECT_THAT(g.Error("aten::native_layer_norm",
                      {V(x), Ints({3}), None(), None(), F(1e-5)}),
              HasSubstr("normalized_shape [3] is not the trailing sizes of "
                        "[2,3,4]"));
  EXPECT_THAT(g.Error("aten::native_layer_norm",
                      {V(x), Ints({4}), V(g.F32({3})), None(), F(1e-5)}),
              HasSubstr("'weight' has sizes [3], not normalized_shape [4]"));
}

// --- kMetadata and no rule
// ---------------------------------------------------------------------

TEST(MetadataTest, NoTensorResult) {
  Graph g;
  ValueId x = g.F32({2, 3});
  absl::StatusOr<std::vector<TensorSpec>> specs =
      g.Infer("aten::sym_size.int", {V(x), I(-1)});
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT(*specs, IsEmpty());
  EXPECT_TRUE(g.Infer("aten::sym_numel", {V(x)}).ok());
  EXPECT_THAT(g.Error("aten::sym_stride.int", {V(x), I(2)}),
              HasSubstr("dim 2 is out of range"));
}

TEST(InferResultSpecsTest, UnimplementedWithoutARuleOrForSymbolicValues) {
  Graph g;
  ValueId x = g.F32({2, 3});
  ValueId n = g.IntScalar();
  OpInfo custom;
  custom.schema = Shared<const OpSchema>::Make(
      *ParseSchema("custom::scale_(Tensor(a!) self, float s) -> Tensor(a!)"));
  Node call;
  call.kind = NodeKind::kCall;
  call.target = "custom::scale_";
  call.args = {V(x), F(2.0)};
  EXPECT_EQ(InferResultSpecs(custom, g.method(), call).status().code(),
            absl::StatusCode::kUnimplemented);
  // A symbolic dim cannot be checked statically.
  EXPECT_EQ(g.Infer("aten::select.int", {V(x), I(0), V(n)}).status().code(),
            absl::StatusCode::kUnimplemented);
  // Types are checked before the rule runs.
  EXPECT_THAT(g.Error("aten::relu", {I(3)}),
              HasSubstr("argument 'self' of 'aten::relu' must be Tensor"));
}

// --- The operators of real networks
// ----------------------------------------------------------
//
// Expected specs are PyTorch 1.13's, printed by tests/passes/gen_op_cases.py
// (the same calls on real tensors); the tests never call Python.

// "f32[1,4,8,8]" with dense strides and offset 0.
MATCHER_P2(IsFresh, dtype, sizes, "") {
  *result_listener << SpecText(arg) << " strides " << ShapeText(arg.Strides());
  return arg.dtype == dtype && arg.sizes == Sizes(sizes) &&
         arg.IsContiguous() && arg.storage_offset == 0;
}

TEST(ConvolutionTest, OutputSizesAsPyTorch) {
  Graph g;
  ValueId x = g.F32({1, 3, 8, 8});
  ValueId w = g.F32({4, 3, 3, 3});
  ValueId b = g.F32({4});
  // conv s1p1: f32[1,4,8,8]
  EXPECT_THAT(
      g.One("aten::convolution", {V(x), V(w), V(b), Ints({1, 1}), Ints({1, 1}),
                                  Ints({1, 1}), B(false), Ints({0, 0}), I(1)}),
      IsFresh(DType::kF32, Sizes({1, 4, 8, 8})));
  // conv s2p0d1, no bias: f32[2,4,4,3]
  ValueId x2 = g.F32({2, 3, 9, 7});
  EXPECT_THAT(g.One("aten::convolution",
                    {V(x2), V(w), None(), Ints({2, 2}), Ints({0, 0}),
                     Ints({1, 1}), B(false), Ints({0, 0}), I(1)}),
              IsFresh(DType::kF32, Sizes({2, 4, 4, 3})));
  // dilation 2, padding [2,1], groups 2: f32[1,8,10,8]
  ValueId x3 = g.F32({1, 4, 10, 10});
  ValueId w3 = g.F32({8, 2, 3, 3});
  EXPECT_THAT(g.One("aten::convolution",
                    {V(x3), V(w3), None(), Ints({1, 1}), Ints({2, 1}),
                     Ints({2, 2}), B(false), Ints({0, 0}), I(2)}),
              IsFresh(DType::kF32, Sizes({1, 8, 10, 8})));
  // conv1d: f32[2,6,5]
  ValueId x4 = g.F32({2, 4, 10});
  ValueId w4 = g.F32({6, 4, 3});
  EXPECT_THAT(
      g.One("aten::convolution", {V(x4), V(w4), None(), Ints({2}), Ints({1}),
                                  Ints({1}), B(false), Ints({0}), I(1)}),
      IsFresh(DType::kF32, Sizes({2, 6, 5})));
  // transposed, output_padding 1: f32[1,2,10,10]
  ValueId x5 = g.F32({1, 4, 5, 5});
  ValueId w5 = g.F32({4, 2, 3, 3});
  EXPECT_THAT(g.One("aten::convolution",
                    {V(x5), V(w5), None(), Ints({2, 2}), Ints({1, 1}),
                     Ints({1, 1}), B(true), Ints({1, 1}), I(1)}),
              IsFresh(DType::kF32, Sizes({1, 2, 10, 10})));
  // transposed, groups 2: f32[1,6,9,9]
  ValueId w6 = g.F32({4, 3, 3, 3});
  EXPECT_THAT(g.One("aten::convolution",
                    {V(x5), V(w6), None(), Ints({2, 2}), Ints({1, 1}),
                     Ints({1, 1}), B(true), Ints({0, 0}), I(2)}),
              IsFresh(DType::kF32, Sizes({1, 6, 9, 9})));
}

TEST(ConvolutionTest, BadOperandsAreShapeErrors) {
  Graph g;
  ValueId x = g.F32({1, 3, 8, 8});
  ValueId w = g.F32({4, 2, 3, 3});
  auto conv = [&](ValueId weight, Argument bias, Argument padding,
                  int64_t groups) {
    return g.Error(
        "aten::convolution",
        {V(x), V(weight), std::move(bias), Ints({1, 1}), std::move(padding),
         Ints({1, 1}), B(false), Ints({0, 0}), I(groups)});
  };
  EXPECT_THAT(conv(w, None(), Ints({1, 1}), 1),
              HasSubstr("expects 2 input channels, but 'input' has 3"));
  EXPECT_THAT(conv(g.F32({4, 3, 3, 3}), V(g.F32({5})), Ints({1, 1}), 1),
              HasSubstr("'bias' has sizes [5], not [4]"));
  EXPECT_THAT(conv(g.F32({4, 3, 9, 9}), None(), Ints({0, 0}), 1),
              HasSubstr("larger than the padded input"));
  EXPECT_THAT(conv(g.F32({4, 3, 3, 3}), None(), Ints({1, 1}), 0),
              HasSubstr("groups must be positive"));
  ValueId half = g.Tensor(DType::kF16, {4, 3, 3, 3});
  absl::StatusOr<std::vector<TensorSpec>> mixed = g.Infer(
      "aten::convolution", {V(x), V(half), None(), Ints({1, 1}), Ints({1, 1}),
                            Ints({1, 1}), B(false), Ints({0, 0}), I(1)});
  EXPECT_TRUE(IsDTypeError(mixed.status())) << mixed.status();
}

TEST(MaxPoolTest, ValuesAndIndices) {
  Graph g;
  absl::StatusOr<std::vector<TensorSpec>> specs = g.Infer(
      "aten::max_pool2d_with_indices",
      {V(g.F32({1, 64, 112, 112})), Ints({3, 3}), Ints({2, 2}), Ints({1, 1})});
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT(*specs,
              ElementsAre(IsFresh(DType::kF32, Sizes({1, 64, 56, 56})),
                          IsFresh(DType::kI64, Sizes({1, 64, 56, 56}))));
  // ceil_mode: [2,3,4,4] (floor would give 3).
  specs = g.Infer("aten::max_pool2d_with_indices",
                  {V(g.F32({2, 3, 7, 7})), Ints({2, 2}), Ints({2, 2}),
                   Ints({0, 0}), Ints({1, 1}), B(true)});
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT((*specs)[0], IsFresh(DType::kF32, Sizes({2, 3, 4, 4})));
  // 3-D input, defaults: stride = kernel.
  specs = g.Infer("aten::max_pool2d_with_indices",
                  {V(g.F32({3, 6, 6})), Ints({2, 2})});
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT((*specs)[1], IsFresh(DType::kI64, Sizes({3, 3, 3})));
  // One value for both dims; stride [] is the kernel.
  specs = g.Infer("aten::max_pool2d_with_indices",
                  {V(g.F32({1, 1, 5, 5})), Ints({3}), Ints({}), Ints({1})});
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT((*specs)[0], IsFresh(DType::kF32, Sizes({1, 1, 2, 2})));
  EXPECT_THAT(g.Error("aten::max_pool2d_with_indices",
                      {V(g.F32({1, 1, 5, 5})), Ints({2, 2}), Ints({1, 1}),
                       Ints({2, 2})}),
              HasSubstr("padding [2,2] must be between 0 and half"));
}

TEST(BatchNormTest, StatisticsAreCOrEmptyInEvalMode) {
  Graph g;
  ValueId x = g.F32({2, 3, 4, 4});
  ValueId c = g.F32({3});
  auto spec = [](DType dtype, Sizes sizes) {
    TensorSpec s;
    s.dtype = dtype;
    s.sizes = std::move(sizes);
    return s;
  };
  std::vector<Argument> eval = {V(x), V(c),     V(c),   V(c),
                                V(c), B(false), F(0.1), F(1e-5)};
  // As the meta kernel (and the frontend) declare them: [3].
  absl::StatusOr<std::vector<TensorSpec>> specs =
      g.InferDeclared("aten::native_batch_norm", eval,
                      {spec(DType::kF32, {2, 3, 4, 4}), spec(DType::kF32, {3}),
                       spec(DType::kF32, {3})});
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT(*specs, ElementsAre(IsFresh(DType::kF32, Sizes({2, 3, 4, 4})),
                                  IsFresh(DType::kF32, Sizes({3})),
                                  IsFresh(DType::kF32, Sizes({3}))));
  // As the CPU kernel returns them: [0].
  specs = g.InferDeclared("aten::native_batch_norm", eval,
                          {spec(DType::kF32, {2, 3, 4, 4}),
                           spec(DType::kF32, {0}), spec(DType::kF32, {0})});
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT((*specs)[1], IsFresh(DType::kF32, Sizes({0})));
  // Training: [C] whatever is declared.
  specs = g.InferDeclared(
      "aten::native_batch_norm",
      {V(x), None(), None(), None(), None(), B(true), F(0.1), F(1e-5)},
      {spec(DType::kF32, {2, 3, 4, 4}), spec(DType::kF32, {0}),
       spec(DType::kF32, {0})});
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT((*specs)[2], IsFresh(DType::kF32, Sizes({3})));
  EXPECT_THAT(
      g.Error("aten::native_batch_norm", {V(x), V(g.F32({4})), None(), V(c),
                                          V(c), B(false), F(0.1), F(1e-5)}),
      HasSubstr("'weight' has sizes [4], not [3]"));
  EXPECT_THAT(
      g.Error("aten::native_batch_norm", {V(x), None(), None(), None(), None(),
                                          B(false), F(0.1), F(1e-5)}),
      HasSubstr("'running_mean' is needed in eval mode"));
}

TEST(ElementwiseTest, HardtanhAndMaskedFill) {
  Graph g;
  ValueId x = g.F32({2, 3});
  EXPECT_THAT(g.One("aten::hardtanh", {V(x), F(0.0), F(6.0)}),
              IsFresh(DType::kF32, Sizes({2, 3})));
  ValueId strided = g.F32({2, 3}, {1, 2});
  EXPECT_THAT(g.One("aten::hardtanh_", {V(strided), F(0.0), F(6.0)}),
              IsLayout(Sizes({2, 3}), Sizes({1, 2}), 0));  // self itself
  ValueId mask = g.Tensor(DType::kBool, {4, 4});
  EXPECT_THAT(g.One("aten::masked_fill.Scalar",
                    {V(g.F32({2, 1, 4, 4})), V(mask), F(-1e30)}),
              IsFresh(DType::kF32, Sizes({2, 1, 4, 4})));
  // The fill value is cast: i32 stays i32.
  EXPECT_THAT(g.One("aten::masked_fill.Scalar",
                    {V(g.Tensor(DType::kI32, {2, 3})),
                     V(g.Tensor(DType::kBool, {2, 3})), F(1.5)}),
              IsFresh(DType::kI32, Sizes({2, 3})));
  absl::StatusOr<std::vector<TensorSpec>> float_mask =
      g.Infer("aten::masked_fill.Scalar", {V(x), V(x), F(0.0)});
  EXPECT_TRUE(IsDTypeError(float_mask.status())) << float_mask.status();
}

TEST(ViewTest, DetachReshapeAliasUnsafeViewSplit) {
  Graph g;
  ValueId t = g.F32({3, 2}, {1, 3});  // a transposed [2,3]
  EXPECT_THAT(g.One("aten::detach", {V(t)}),
              IsLayout(Sizes({3, 2}), Sizes({1, 3}), 0));
  ValueId x = g.F32({2, 3, 4});
  EXPECT_THAT(g.One("aten::_reshape_alias", {V(x), Ints({6, 4}), Ints({4, 1})}),
              IsLayout(Sizes({6, 4}), Sizes({4, 1}), 0));
  EXPECT_THAT(
      g.Error("aten::_reshape_alias", {V(x), Ints({6, 5}), Ints({5, 1})}),
      HasSubstr("size [6,5] is invalid for [2,3,4]"));
  EXPECT_THAT(g.One("aten::_unsafe_view", {V(x), Ints({4, -1})}),
              IsFresh(DType::kF32, Sizes({4, 6})));

  absl::StatusOr<std::vector<TensorSpec>> pieces =
      g.Infer("aten::split.Tensor", {V(g.F32({5, 4})), I(2)});
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  EXPECT_THAT(*pieces, ElementsAre(IsLayout(Sizes({2, 4}), Sizes({4, 1}), 0),
                                   IsLayout(Sizes({2, 4}), Sizes({4, 1}), 8),
                                   IsLayout(Sizes({1, 4}), Sizes({4, 1}), 16)));
  pieces = g.Infer("aten::split.Tensor", {V(g.F32({2, 7})), I(3), I(-1)});
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  EXPECT_THAT(*pieces, ElementsAre(IsLayout(Sizes({2, 3}), Sizes({7, 1}), 0),
                                   IsLayout(Sizes({2, 3}), Sizes({7, 1}), 3),
                                   IsLayout(Sizes({2, 1}), Sizes({7, 1}), 6)));
  EXPECT_THAT(g.Error("aten::split.Tensor", {V(x), I(0)}),
              HasSubstr("split_size 0 cannot split dim 0 of size 2"));
}

TEST(ReductionTest, MeanDimOfAFeatureMap) {
  Graph g;
  EXPECT_THAT(g.One("aten::mean.dim",
                    {V(g.F32({1, 512, 7, 7})), Ints({-1, -2}), B(true)}),
              IsFresh(DType::kF32, Sizes({1, 512, 1, 1})));
}

TEST(AttentionTest, EmbeddingAndSoftmaxes) {
  Graph g;
  EXPECT_THAT(g.One("aten::embedding",
                    {V(g.F32({10, 5})), V(g.Tensor(DType::kI64, {2, 3}))}),
              IsFresh(DType::kF32, Sizes({2, 3, 5})));
  absl::StatusOr<std::vector<TensorSpec>> float_ids =
      g.Infer("aten::embedding", {V(g.F32({10, 5})), V(g.F32({2, 3}))});
  EXPECT_TRUE(IsDTypeError(float_ids.status())) << float_ids.status();
  ValueId x = g.F32({2, 3});
  EXPECT_THAT(g.One("aten::_softmax", {V(x), I(-1), B(false)}),
              IsFresh(DType::kF32, Sizes({2, 3})));
  EXPECT_THAT(g.One("aten::_log_softmax", {V(x), I(1), B(false)}),
              IsFresh(DType::kF32, Sizes({2, 3})));
  EXPECT_THAT(g.Error("aten::_log_softmax", {V(x), I(2), B(false)}),
              HasSubstr("dim 2 is out of range"));
}

TEST(AttentionTest, NativeMultiHeadAttention) {
  Graph g;
  ValueId q = g.F32({2, 5, 8});
  ValueId qkv_w = g.F32({24, 8});
  ValueId qkv_b = g.F32({24});
  ValueId proj_w = g.F32({8, 8});
  ValueId proj_b = g.F32({8});
  auto mha = [&](std::vector<Argument> tail) {
    std::vector<Argument> args = {V(q),     V(q),     V(q),      I(8),     I(2),
                                  V(qkv_w), V(qkv_b), V(proj_w), V(proj_b)};
    for (Argument& a : tail) args.push_back(std::move(a));
    return g.Infer("aten::_native_multi_head_attention", std::move(args));
  };
  absl::StatusOr<std::vector<TensorSpec>> specs = mha({});
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT(*specs, ElementsAre(IsFresh(DType::kF32, Sizes({2, 5, 8})),
                                  IsFresh(DType::kF32, Sizes({2, 5, 5}))));
  specs = mha({None(), B(true), B(false)});  // per head
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT((*specs)[1], IsFresh(DType::kF32, Sizes({2, 2, 5, 5})));
  specs = mha({None(), B(false)});  // no weights: an empty tensor
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT((*specs)[1], IsFresh(DType::kF32, Sizes({0})));
  EXPECT_THAT(g.Error("aten::_native_multi_head_attention",
                      {V(q), V(q), V(q), I(8), I(3), V(qkv_w), V(qkv_b),
                       V(proj_w), V(proj_b)}),
              HasSubstr("embed_dim 8 is not divisible into num_head 3"));
  EXPECT_THAT(g.Error("aten::_native_multi_head_attention",
                      {V(q), V(q), V(q), I(8), I(2), V(proj_w), V(qkv_b),
                       V(proj_w), V(proj_b)}),
              HasSubstr("'qkv_weight' has sizes [8,8], not [24,8]"));
}

TEST(CreationTest, ArangeLengthsAndDtypes) {
  Graph g;
  EXPECT_THAT(g.One("aten::arange", {I(5)}), IsFresh(DType::kI64, Sizes({5})));
  EXPECT_THAT(g.One("aten::arange", {F(2.5)}),
              IsFresh(DType::kF32, Sizes({3})));
  EXPECT_THAT(
      g.One("aten::arange", {I(3), Named("dtype", DTypeArg(DType::kF16))}),
      IsFresh(DType::kF16, Sizes({3})));
  EXPECT_THAT(g.One("aten::arange.start", {I(2), I(7)}),
              IsFresh(DType::kI64, Sizes({5})));
  EXPECT_THAT(g.One("aten::arange.start_step", {I(0), I(10), I(3)}),
              IsFresh(DType::kI64, Sizes({4})));
  EXPECT_THAT(g.One("aten::arange.start_step", {I(0), I(1), F(0.3)}),
              IsFresh(DType::kF32, Sizes({4})));
  EXPECT_THAT(g.One("aten::arange.start_step", {I(10), I(0), I(-3)}),
              IsFresh(DType::kI64, Sizes({4})));
  EXPECT_THAT(g.Error("aten::arange.start_step", {I(0), I(10), I(0)}),
              HasSubstr("the step must be nonzero"));
  EXPECT_THAT(g.Error("aten::arange.start_step", {I(0), I(10), I(-1)}),
              HasSubstr("inconsistent with the step's sign"));
  // 2^62 elements of 8 bytes: more bytes than int64 counts.
  EXPECT_THAT(g.Error("aten::arange", {I(int64_t{1} << 62)}),
              HasSubstr("the result's size [4611686018427387904] overflows"));
}

TEST(CreationTest, OnesZerosEmptyTriu) {
  Graph g;
  EXPECT_THAT(g.One("aten::ones", {Ints({2, 3})}),
              IsFresh(DType::kF32, Sizes({2, 3})));
  EXPECT_THAT(
      g.One("aten::ones", {Ints({4}), Named("dtype", DTypeArg(DType::kI64))}),
      IsFresh(DType::kI64, Sizes({4})));
  EXPECT_THAT(g.One("aten::zeros", {Ints({0})}),
              IsFresh(DType::kF32, Sizes({0})));
  EXPECT_THAT(g.One("aten::empty.memory_format",
                    {Ints({2, 3}), Named("dtype", DTypeArg(DType::kF16))}),
              IsFresh(DType::kF16, Sizes({2, 3})));
  // channels_last (MemoryFormat 2): NHWC strides.
  EXPECT_THAT(g.One("aten::empty.memory_format",
                    {Ints({2, 3, 4, 5}), Named("memory_format", I(2))}),
              IsLayout(Sizes({2, 3, 4, 5}), Sizes({60, 1, 15, 3}), 0));
  EXPECT_THAT(g.Error("aten::ones", {Ints({2, -1})}),
              HasSubstr("is negative in dim 1"));
  EXPECT_THAT(g.One("aten::triu", {V(g.F32({3, 4})), I(1)}),
              IsFresh(DType::kF32, Sizes({3, 4})));
  EXPECT_THAT(g.Error("aten::triu", {V(g.F32({3}))}),
              HasSubstr("must be at least 2-D"));
}

// --- Robustness
// -------------------------------------------------------------------

// Every registered operator, called with random arguments over random (also
// hostile) operand specs, answers with a status and never crashes.
TEST(InferResultSpecsTest, FuzzNeverCrashes) {
  std::mt19937_64 random(7);
  const int64_t kHuge = int64_t{1} << 62;
  const std::vector<int64_t> sizes_pool = {0, 1, 2, 3, 5, kHuge, -1};
  const std::vector<int64_t> ints_pool = {0,
                                          1,
                                          2,
                                          -1,
                                          -2,
                                          3,
                                          7,
                                          -100,
                                          kHuge,
                                          -kHuge,
                                          std::numeric_limits<int64_t>::max(),
                                          std::numeric_limits<int64_t>::min()};
  const std::vector<DType> dtypes = {DType::kF32, DType::kF16,  DType::kI32,
                                     DType::kI64, DType::kBool, DType::kU8};
  auto pick = [&](const auto& pool) { return pool[random() % pool.size()]; };
  int answered_ok = 0;
  int checked_both_ways = 0;
  for (const std::string& op : RegisteredOps()) {
    const OpInfo* info = LookupOp(op);
    for (int iteration = 0; iteration < 300; ++iteration) {
      Graph g;
      std::vector<ValueId> tensors;
      for (int t = 0; t < 3; ++t) {
        int rank = static_cast<int>(random() % 5);
        Sizes sizes;
        Sizes strides;
        // Mostly sane sizes, sometimes hostile ones.
        for (int d = 0; d < rank; ++d) {
          sizes.push_back(random() % 8 == 0 ? pick(sizes_pool)
                                            : 1 + random() % 4);
        }
        if (random() % 3 == 0) {
          for (int d = 0; d < rank + (random() % 6 == 0 ? 1 : 0); ++d) {
            strides.push_back(random() % 8 == 0 ? pick(ints_pool)
                                                : random() % 13);
          }
        }
        tensors.push_back(
            g.Tensor(pick(dtypes), sizes, strides,
                     random() % 10 == 0 ? pick(ints_pool) : random() % 4));
      }
      ValueId scalar = g.IntScalar();
      std::vector<Argument> args;
      size_t count = info->schema->arguments.size();
      if (random() % 4 == 0) count = random() % (count + 2);
      for (size_t a = 0; a < count; ++a) {
        switch (random() % 10) {
          case 0:
          case 1:
          case 2:
            args.push_back(V(pick(tensors)));
            break;
          case 3:
            args.push_back(I(pick(ints_pool)));
            break;
          case 4: {
            Sizes list;
            for (uint64_t n = random() % 5; n > 0; --n) {
              list.push_back(random() % 2 ? pick(ints_pool)
                                          : int64_t(random() % 4) - 1);
            }
            args.push_back(Ints(list));
            break;
          }
          case 5:
            args.push_back(Values({pick(tensors), pick(tensors)}));
            break;
          case 6:
            args.push_back(None());
            break;
          case 7:
            args.push_back(B(random() % 2));
            break;
          case 8:
            args.push_back(F(0.5));
            break;
          default:
            args.push_back(random() % 2 ? V(scalar) : DTypeArg(pick(dtypes)));
            break;
        }
      }
      // Well-typed calls most of the time: the first argument a tensor.
      if (!args.empty() && random() % 2) args[0] = V(pick(tensors));
      absl::StatusOr<std::vector<TensorSpec>> specs = g.Infer(op, args);
      if (specs.ok()) ++answered_ok;
      checked_both_ways += g.bound_inferences();
    }
  }
  EXPECT_GT(answered_ok, 0);
  // Infer compared InferBoundResultSpecs with InferResultSpecs on these.
  EXPECT_GT(checked_both_ways, answered_ok);
}

}  // namespace
}  // namespace ferry
