// ParseSchema and the built-in operator registry.
#include "passes/schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "passes/ir.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// Every operator the registry must hold (DESIGN.md §2, the edge dialect).
const std::vector<std::string>& ExpectedOps() {
  static const auto* ops = new std::vector<std::string>{
      "aten::add.Tensor",
      "aten::add.Scalar",
      "aten::sub.Tensor",
      "aten::sub.Scalar",
      "aten::mul.Tensor",
      "aten::mul.Scalar",
      "aten::div.Tensor",
      "aten::div.Scalar",
      "aten::relu",
      "aten::sin",
      "aten::cos",
      "aten::exp",
      "aten::neg",
      "aten::tanh",
      "aten::sigmoid",
      "aten::gelu",
      "aten::relu_",
      "aten::add_.Tensor",
      "aten::add_.Scalar",
      "aten::mul_.Tensor",
      "aten::mul_.Scalar",
      "aten::copy_",
      "aten::fill_.Scalar",
      "aten::view",
      "aten::reshape",
      "aten::transpose.int",
      "aten::permute",
      "aten::t",
      "aten::expand",
      "aten::slice.Tensor",
      "aten::select.int",
      "aten::unsqueeze",
      "aten::squeeze.dim",
      "aten::squeeze",
      "aten::alias",
      "aten::view_copy",
      "aten::permute_copy",
      "aten::transpose_copy.int",
      "aten::t_copy",
      "aten::expand_copy",
      "aten::slice_copy.Tensor",
      "aten::select_copy.int",
      "aten::unsqueeze_copy",
      "aten::squeeze_copy.dim",
      "aten::alias_copy",
      "aten::clone",
      "aten::mm",
      "aten::addmm",
      "aten::bmm",
      "aten::linear",
      "aten::sum.dim_IntList",
      "aten::mean.dim",
      "aten::amax",
      "aten::_softmax",
      "aten::native_layer_norm",
      "aten::cat",
      "aten::sym_size.int",
      "aten::sym_numel",
      "aten::sym_stride.int",
      "et_copy::_h2d_copy",
      "et_copy::_d2h_copy",
      // The operators of real networks (issue 9).
      "aten::hardtanh",
      "aten::hardtanh_",
      "aten::masked_fill.Scalar",
      "aten::_reshape_alias",
      "aten::detach",
      "aten::split.Tensor",
      "aten::_unsafe_view",
      "aten::convolution",
      "aten::max_pool2d_with_indices",
      "aten::native_batch_norm",
      "aten::embedding",
      "aten::_log_softmax",
      "aten::_native_multi_head_attention",
      "aten::arange",
      "aten::arange.start",
      "aten::arange.start_step",
      "aten::ones",
      "aten::zeros",
      "aten::empty.memory_format",
      "aten::triu",
  };
  return *ops;
}

bool IsView(const std::string& name) {
  static const auto* views =
      new std::vector<std::string>{"aten::view",
                                   "aten::reshape",
                                   "aten::transpose.int",
                                   "aten::permute",
                                   "aten::t",
                                   "aten::expand",
                                   "aten::slice.Tensor",
                                   "aten::select.int",
                                   "aten::unsqueeze",
                                   "aten::squeeze.dim",
                                   "aten::squeeze",
                                   "aten::alias",
                                   "aten::detach",
                                   "aten::_reshape_alias",
                                   "aten::split.Tensor"};
  return std::find(views->begin(), views->end(), name) != views->end();
}

bool IsInPlace(const std::string& name) {
  static const auto* in_place = new std::vector<std::string>{
      "aten::relu_",        "aten::add_.Tensor", "aten::add_.Scalar",
      "aten::mul_.Tensor",  "aten::mul_.Scalar", "aten::copy_",
      "aten::fill_.Scalar", "aten::hardtanh_"};
  return std::find(in_place->begin(), in_place->end(), name) != in_place->end();
}

// --- A printer for round trips (test only)
// -------------------------------------

std::string TypeToText(const SchemaArgument& arg) {
  static const char* const kBase[] = {
      "Tensor", "int",    "float",        "bool",   "Scalar",
      "int",    "float",  "bool",         "Tensor", "ScalarType",
      "Layout", "Device", "MemoryFormat", "str",    "Any"};
  std::string text = kBase[static_cast<int>(arg.type.kind)];
  if (arg.alias) {
    text += "(" + arg.alias->set + (arg.alias->is_write ? "!" : "") + ")";
  }
  switch (arg.type.kind) {
    case SchemaTypeKind::kIntList:
    case SchemaTypeKind::kFloatList:
    case SchemaTypeKind::kBoolList:
    case SchemaTypeKind::kTensorList:
      text += "[" +
              (arg.type.fixed_size >= 0 ? std::to_string(arg.type.fixed_size)
                                        : "") +
              "]";
      break;
    default:
      break;
  }
  if (arg.type.optional) text += "?";
  return text;
}

std::string SchemaToText(const OpSchema& schema) {
  std::string text = schema.QualifiedName() + "(";
  bool kwarg_only = false;
  for (size_t i = 0; i < schema.arguments.size(); ++i) {
    const SchemaArgument& arg = schema.arguments[i];
    if (i > 0) text += ", ";
    if (arg.kwarg_only && !kwarg_only) {
      text += "*, ";
      kwarg_only = true;
    }
    text += TypeToText(arg) + " " + arg.name;
    if (arg.default_value) text += "=" + *arg.default_value;
  }
  text += ") -> ";
  bool parens = schema.returns.size() != 1;
  if (parens) text += "(";
  for (size_t i = 0; i < schema.returns.size(); ++i) {
    if (i > 0) text += ", ";
    text += TypeToText(schema.returns[i]);
    if (!schema.returns[i].name.empty()) text += " " + schema.returns[i].name;
  }
  if (parens) text += ")";
  return text;
}

void ExpectSameSchema(const OpSchema& a, const OpSchema& b) {
  EXPECT_EQ(a.QualifiedName(), b.QualifiedName());
  ASSERT_EQ(a.arguments.size(), b.arguments.size());
  for (size_t i = 0; i < a.arguments.size(); ++i) {
    SCOPED_TRACE(a.arguments[i].name);
    EXPECT_EQ(a.arguments[i].name, b.arguments[i].name);
    EXPECT_EQ(a.arguments[i].type.kind, b.arguments[i].type.kind);
    EXPECT_EQ(a.arguments[i].type.optional, b.arguments[i].type.optional);
    EXPECT_EQ(a.arguments[i].type.fixed_size, b.arguments[i].type.fixed_size);
    EXPECT_EQ(a.arguments[i].alias.has_value(),
              b.arguments[i].alias.has_value());
    EXPECT_EQ(a.arguments[i].default_value, b.arguments[i].default_value);
    EXPECT_EQ(a.arguments[i].kwarg_only, b.arguments[i].kwarg_only);
  }
  ASSERT_EQ(a.returns.size(), b.returns.size());
  EXPECT_EQ(a.returns_tuple, b.returns_tuple);
  EXPECT_EQ(a.WrittenArguments(), b.WrittenArguments());
  for (int r = 0; r < static_cast<int>(a.returns.size()); ++r) {
    EXPECT_EQ(a.AliasedArgument(r), b.AliasedArgument(r));
  }
}

// --- The registry
// ----------------------------------------------------------------

TEST(RegistryTest, HoldsExactlyTheBuiltinOperators) {
  std::vector<std::string> expected = ExpectedOps();
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(RegisteredOps(), expected);  // Sorted: a stable order.
}

TEST(RegistryTest, EveryBuiltinSchemaRoundTripsItsFacts) {
  for (const std::string& name : RegisteredOps()) {
    SCOPED_TRACE(name);
    const OpInfo* info = LookupOp(name);
    ASSERT_NE(info, nullptr);
    ASSERT_NE(info->schema, nullptr);
    EXPECT_EQ(info->schema->QualifiedName(), name);
    std::string printed = SchemaToText(*info->schema);
    absl::StatusOr<OpSchema> reparsed = ParseSchema(printed);
    ASSERT_TRUE(reparsed.ok()) << printed << ": " << reparsed.status();
    ExpectSameSchema(*info->schema, *reparsed);
  }
}

// Alias facts come from annotations only; this pins them for every operator.
TEST(RegistryTest, AliasFactsFollowTheAnnotations) {
  for (const std::string& name : RegisteredOps()) {
    SCOPED_TRACE(name);
    const OpSchema& schema = *LookupOp(name)->schema;
    if (IsInPlace(name)) {
      EXPECT_TRUE(schema.HasAliasAnnotations());
      EXPECT_THAT(schema.WrittenArguments(), ElementsAre(0));
      EXPECT_EQ(schema.AliasedArgument(0), 0);
    } else if (IsView(name)) {
      EXPECT_TRUE(schema.HasAliasAnnotations());
      EXPECT_THAT(schema.WrittenArguments(), IsEmpty());
      EXPECT_EQ(schema.AliasedArgument(0), 0);
    } else {
      EXPECT_THAT(schema.WrittenArguments(), IsEmpty());
      for (int r = 0; r < static_cast<int>(schema.returns.size()); ++r) {
        EXPECT_EQ(schema.AliasedArgument(r), std::nullopt);
      }
    }
  }
}

TEST(RegistryTest, ReluInPlaceWritesSelfAndReturnsIt) {
  const OpInfo* info = LookupOp("aten::relu_");
  ASSERT_NE(info, nullptr);
  EXPECT_THAT(info->schema->WrittenArguments(), ElementsAre(0));
  EXPECT_EQ(info->schema->AliasedArgument(0), 0);
  EXPECT_FALSE(info->metadata_only);
}

TEST(RegistryTest, TransposeIsAViewWithoutWrite) {
  const OpInfo* info = LookupOp("aten::transpose.int");
  ASSERT_NE(info, nullptr);
  EXPECT_THAT(info->schema->WrittenArguments(), IsEmpty());
  EXPECT_EQ(info->schema->AliasedArgument(0), 0);
  EXPECT_EQ(info->shape_rule, ShapeRule::kView);
  EXPECT_EQ(LookupOp("aten::transpose_copy.int")->schema->AliasedArgument(0),
            std::nullopt);
}

TEST(RegistryTest, NativeLayerNormReturnsATupleOfThree) {
  const OpSchema& schema = *LookupOp("aten::native_layer_norm")->schema;
  EXPECT_TRUE(schema.returns_tuple);
  EXPECT_EQ(schema.returns.size(), 3u);
  EXPECT_EQ(schema.arguments[schema.ArgumentIndex("eps")].type.kind,
            SchemaTypeKind::kFloat);
  EXPECT_TRUE(schema.arguments[schema.ArgumentIndex("weight")].type.optional);
}

TEST(RegistryTest, MetadataOperatorsAreMetadataOnly) {
  for (const char* name :
       {"aten::sym_size.int", "aten::sym_numel", "aten::sym_stride.int"}) {
    SCOPED_TRACE(name);
    const OpInfo* info = LookupOp(name);
    ASSERT_NE(info, nullptr);
    EXPECT_TRUE(info->metadata_only);
    EXPECT_EQ(info->shape_rule, ShapeRule::kMetadata);
    EXPECT_EQ(info->schema->returns[0].type.kind, SchemaTypeKind::kInt);
  }
  int metadata_only = 0;
  for (const std::string& name : RegisteredOps()) {
    metadata_only += LookupOp(name)->metadata_only;
  }
  EXPECT_EQ(metadata_only, 3);
}

TEST(RegistryTest, CopyKernelsAreOrdinaryOperators) {
  for (std::string_view name : {kH2DCopyOp, kD2HCopyOp}) {
    const OpInfo* info = LookupOp(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_FALSE(info->metadata_only);
    EXPECT_EQ(info->shape_rule, ShapeRule::kSameAsSelf);
    EXPECT_EQ(info->schema->ns, "et_copy");
  }
}

TEST(RegistryTest, LookupAcceptsTheDefaultOverloadSpelledOut) {
  const OpInfo* relu = LookupOp("aten::relu");
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(LookupOp("aten::relu.default"), relu);
  EXPECT_EQ(LookupOp("aten::add"), nullptr);  // add has only overloads
  EXPECT_EQ(LookupOp("aten::add.default"), nullptr);
  EXPECT_EQ(LookupOp("aten::add.Tensor.default"), nullptr);
  EXPECT_EQ(LookupOp("aten::no_such_op"), nullptr);
  EXPECT_EQ(LookupOp(""), nullptr);
  EXPECT_EQ(LookupOp("relu"), nullptr);
}

// A call's registered operator is what looking its target up gives, whether
// read from the registry's schema the node carries (a pointer back to its
// entry) or, for a schema of the node's own, looked up by name.
TEST(RegistryTest, RegisteredOpIsTheLookupOfTheTarget) {
  for (const std::string& name : RegisteredOps()) {
    const OpInfo* info = LookupOp(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->schema->registered, info) << name;
    Node call;
    call.kind = NodeKind::kCall;
    call.target = name;
    call.schema = info->schema;
    EXPECT_EQ(RegisteredOp(call), info) << name;
  }
  const OpInfo* relu = LookupOp("aten::relu");
  ASSERT_NE(relu, nullptr);
  Node call;
  call.kind = NodeKind::kCall;
  call.target = "aten::relu.default";
  call.schema = relu->schema;
  EXPECT_EQ(RegisteredOp(call), relu);

  // A schema of the node's own (as import parses call.schema) points
  // nowhere: the operator is looked up by the node's target.
  absl::StatusOr<OpSchema> own =
      ParseSchema("aten::relu(Tensor self) -> Tensor");
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->registered, nullptr);
  call.schema_text = "aten::relu(Tensor self) -> Tensor";
  call.schema = Shared<const OpSchema>::Make(*own);
  EXPECT_EQ(RegisteredOp(call), relu);
  call.target = "custom::relu";
  EXPECT_EQ(RegisteredOp(call), nullptr);

  // No schema (an unknown operator), and nodes that call nothing.
  Node unknown;
  unknown.kind = NodeKind::kCall;
  unknown.target = "aten::no_such_op";
  EXPECT_EQ(RegisteredOp(unknown), nullptr);
  Node input;
  input.kind = NodeKind::kInput;
  input.target = "aten::relu";
  EXPECT_EQ(RegisteredOp(input), nullptr);
}

TEST(RegistryTest, GeluDefaultsApproximateToNone) {
  const OpSchema& schema = *LookupOp("aten::gelu")->schema;
  const SchemaArgument& approximate =
      schema.arguments[schema.ArgumentIndex("approximate")];
  EXPECT_EQ(approximate.type.kind, SchemaTypeKind::kString);
  EXPECT_TRUE(approximate.kwarg_only);
  EXPECT_EQ(approximate.default_value, "'none'");
}

// --- Parsing well-formed schemas
// ---------------------------------------------------

OpSchema MustParse(const std::string& text) {
  absl::StatusOr<OpSchema> schema = ParseSchema(text);
  EXPECT_TRUE(schema.ok()) << text << ": " << schema.status();
  return schema.ok() ? *schema : OpSchema{};
}

TEST(ParseSchemaTest, NamesAndOverloads) {
  OpSchema add = MustParse(
      "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> "
      "Tensor");
  EXPECT_EQ(add.ns, "aten");
  EXPECT_EQ(add.name, "add");
  EXPECT_EQ(add.overload, "Tensor");
  EXPECT_EQ(add.QualifiedName(), "aten::add.Tensor");
  ASSERT_EQ(add.arguments.size(), 3u);
  EXPECT_FALSE(add.arguments[1].kwarg_only);
  EXPECT_TRUE(add.arguments[2].kwarg_only);
  EXPECT_EQ(add.arguments[2].default_value, "1");
  EXPECT_EQ(add.ArgumentIndex("other"), 1);
  EXPECT_EQ(add.ArgumentIndex("nope"), -1);

  OpSchema relu = MustParse("aten::relu.default(Tensor self) -> Tensor");
  EXPECT_EQ(relu.overload, "");
  EXPECT_EQ(relu.QualifiedName(), "aten::relu");
}

TEST(ParseSchemaTest, ListAndOptionalTypes) {
  OpSchema schema = MustParse(
      "aten::f(Tensor?[] indices, int[1]? dim=None, SymInt[] size=[], "
      "int[2] stride=1, bool[3] mask, float[] scales, Tensor[] tensors, "
      "ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
      "MemoryFormat memory_format=contiguous_format, Generator? gen=None, "
      "str? s=None, int reduction=Mean) -> Tensor");
  ASSERT_EQ(schema.arguments.size(), 14u);
  const auto& a = schema.arguments;
  EXPECT_EQ(a[0].type.kind, SchemaTypeKind::kTensorList);
  EXPECT_FALSE(a[0].type.optional);  // The elements are optional.
  EXPECT_EQ(a[1].type.kind, SchemaTypeKind::kIntList);
  EXPECT_TRUE(a[1].type.optional);
  EXPECT_EQ(a[1].type.fixed_size, 1);
  EXPECT_EQ(a[1].default_value, "None");
  EXPECT_EQ(a[2].type.kind, SchemaTypeKind::kIntList);
  EXPECT_EQ(a[2].type.fixed_size, -1);
  EXPECT_EQ(a[2].default_value, "[]");
  EXPECT_EQ(a[3].type.fixed_size, 2);
  EXPECT_EQ(a[4].type.kind, SchemaTypeKind::kBoolList);
  EXPECT_EQ(a[5].type.kind, SchemaTypeKind::kFloatList);
  EXPECT_EQ(a[6].type.kind, SchemaTypeKind::kTensorList);
  EXPECT_EQ(a[7].type.kind, SchemaTypeKind::kScalarType);
  EXPECT_EQ(a[8].type.kind, SchemaTypeKind::kLayout);
  EXPECT_EQ(a[9].type.kind, SchemaTypeKind::kDevice);
  EXPECT_EQ(a[10].type.kind, SchemaTypeKind::kMemoryFormat);
  EXPECT_EQ(a[10].default_value, "contiguous_format");
  EXPECT_EQ(a[11].type.kind, SchemaTypeKind::kAny);
  EXPECT_EQ(a[12].type.kind, SchemaTypeKind::kString);
  EXPECT_EQ(a[13].default_value, "Mean");
}

TEST(ParseSchemaTest, Defaults) {
  OpSchema schema = MustParse(
      "aten::f(int dim=-1, float eps=1e-05, float p=2, float q=-0.5, "
      "bool keepdim=False, bool b=True, str approximate=\"none\", "
      "str mode='tanh', int[] dims=[0, -1], float m=-inf, Scalar s=1.5e+3) "
      "-> Tensor");
  const auto& a = schema.arguments;
  ASSERT_EQ(a.size(), 11u);
  EXPECT_EQ(a[0].default_value, "-1");
  EXPECT_EQ(a[1].default_value, "1e-05");
  EXPECT_EQ(a[2].default_value, "2");
  EXPECT_EQ(a[3].default_value, "-0.5");
  EXPECT_EQ(a[4].default_value, "False");
  EXPECT_EQ(a[5].default_value, "True");
  EXPECT_EQ(a[6].default_value, "\"none\"");
  EXPECT_EQ(a[7].default_value, "'tanh'");
  EXPECT_EQ(a[8].default_value, "[0, -1]");
  EXPECT_EQ(a[9].default_value, "-inf");
  EXPECT_EQ(a[10].default_value, "1.5e+3");
}

TEST(ParseSchemaTest, AliasAnnotations) {
  OpSchema schema = MustParse(
      "aten::f(Tensor(a) self, Tensor(b!) out, Tensor(c -> *) other, "
      "Tensor(d!)[] outs, Tensor plain) -> (Tensor(a), Tensor(b!), Tensor(c), "
      "Tensor)");
  const auto& a = schema.arguments;
  ASSERT_TRUE(a[0].alias.has_value());
  EXPECT_EQ(a[0].alias->set, "a");
  EXPECT_FALSE(a[0].alias->is_write);
  EXPECT_TRUE(a[1].alias->is_write);
  EXPECT_EQ(a[2].alias->set, "c");  // `c -> *` reads as c
  EXPECT_EQ(a[3].type.kind, SchemaTypeKind::kTensorList);
  EXPECT_TRUE(a[3].alias->is_write);
  EXPECT_FALSE(a[4].alias.has_value());
  EXPECT_THAT(schema.WrittenArguments(), ElementsAre(1, 3));
  EXPECT_EQ(schema.AliasedArgument(0), 0);
  EXPECT_EQ(schema.AliasedArgument(1), 1);
  EXPECT_EQ(schema.AliasedArgument(2), 2);
  EXPECT_EQ(schema.AliasedArgument(3), std::nullopt);
  EXPECT_EQ(schema.AliasedArgument(4), std::nullopt);  // out of range
  EXPECT_EQ(schema.AliasedArgument(-1), std::nullopt);

  EXPECT_TRUE(schema.HasAliasAnnotations());

  // A wildcard result may alias anything: no one argument.
  OpSchema wildcard = MustParse("x::g(Tensor(a) self) -> Tensor(*)");
  EXPECT_EQ(wildcard.AliasedArgument(0), std::nullopt);
  EXPECT_TRUE(wildcard.HasAliasAnnotations());

  // Without annotations: reads its arguments, returns fresh storage.
  OpSchema plain = MustParse("x::h(Tensor self, Tensor other) -> Tensor");
  EXPECT_FALSE(plain.HasAliasAnnotations());
  EXPECT_THAT(plain.WrittenArguments(), IsEmpty());
  EXPECT_EQ(plain.AliasedArgument(0), std::nullopt);

  // The facts are worked out again when a schema's annotations change.
  plain.arguments[0].alias = AliasInfo{"a", true};
  plain.returns[0].alias = AliasInfo{"a", true};
  plain.DeriveAliasFacts();
  EXPECT_TRUE(plain.HasAliasAnnotations());
  EXPECT_THAT(plain.WrittenArguments(), ElementsAre(0));
  EXPECT_EQ(plain.AliasedArgument(0), 0);
}

TEST(ParseSchemaTest, Returns) {
  OpSchema none = MustParse("aten::f(Tensor(a!) self) -> ()");
  EXPECT_THAT(none.returns, IsEmpty());
  EXPECT_FALSE(none.returns_tuple);

  OpSchema named = MustParse(
      "aten::max.dim(Tensor self, int dim, bool keepdim=False) -> "
      "(Tensor values, Tensor indices)");
  ASSERT_EQ(named.returns.size(), 2u);
  EXPECT_TRUE(named.returns_tuple);
  EXPECT_EQ(named.returns[0].name, "values");
  EXPECT_EQ(named.returns[1].name, "indices");

  OpSchema one_in_parens = MustParse("aten::f(Tensor self) -> (Tensor)");
  EXPECT_EQ(one_in_parens.returns.size(), 1u);
  EXPECT_FALSE(one_in_parens.returns_tuple);

  EXPECT_EQ(MustParse("aten::f(Tensor self) -> int").returns[0].type.kind,
            SchemaTypeKind::kInt);
  EXPECT_EQ(MustParse("aten::f(Tensor self) -> SymInt").returns[0].type.kind,
            SchemaTypeKind::kInt);
  OpSchema list =
      MustParse("aten::split(Tensor(a) self, int s) -> Tensor(a)[]");
  EXPECT_EQ(list.returns[0].type.kind, SchemaTypeKind::kTensorList);
  EXPECT_EQ(list.AliasedArgument(0), 0);

  OpSchema no_args = MustParse("  aten::f ( ) -> Tensor  ");
  EXPECT_THAT(no_args.arguments, IsEmpty());
}

// --- Rejecting malformed schemas
// ------------------------------------------------------

struct Malformed {
  std::string text;
  std::string message;  // a substring of the error
};

TEST(ParseSchemaTest, RejectsMalformedSchemasWithAClearMessage) {
  const std::vector<Malformed> cases = {
      {"",
       "column 1: expected a namespace such as 'aten', found the end of "
       "the schema"},
      {"relu(Tensor self) -> Tensor",
       "column 5: expected '::' after the namespace 'relu', found '('"},
      {"aten::(Tensor self) -> Tensor",
       "column 7: expected an operator name after '::'"},
      {"aten::relu.(Tensor self) -> Tensor", "expected an overload name"},
      {"aten::relu Tensor self) -> Tensor",
       "column 12: expected '(' to open the parameters, found 'Tensor'"},
      {"aten::relu(Tensor self -> Tensor",
       "column 24: expected ',' or ')' after a parameter, found '-'"},
      {"aten::relu(Tensor self)",
       "column 24: expected '->' after the parameters, found the end of the "
       "schema"},
      {"aten::relu(Tensor self) ->", "column 27: expected a type"},
      {"aten::relu(Tensr self) -> Tensor", "column 12: unknown type 'Tensr'"},
      {"aten::relu(Tensor) -> Tensor",
       "column 18: expected a parameter name, found ')'"},
      {"aten::relu(Tensor(a! self) -> Tensor",
       "expected ')' to close the alias annotation, found 'self'"},
      {"aten::f(Tensor() self) -> Tensor", "expected an alias set"},
      {"aten::f(int(a) x) -> Tensor", "alias annotation on 'int'"},
      {"aten::f(int[ x) -> Tensor", "expected ']' to close the list type"},
      {"aten::f(int[][] x) -> Tensor", "list of lists"},
      {"aten::f(int?? x) -> Tensor", "second '?'"},
      {"aten::f(int x=1.5) -> Tensor",
       "column 15: default '1.5' does not fit type 'int'"},
      {"aten::f(int x=None) -> Tensor",
       "default None needs an optional type, not 'int'"},
      {"aten::f(bool x=1) -> Tensor", "default '1' does not fit type 'bool'"},
      {"aten::f(str s='abc) -> Tensor", "column 15: unterminated string"},
      {"aten::f(int[] x=[1, 2) -> Tensor",
       "expected ',' or ']' in a list default"},
      {"aten::f(int[] x=[1.5]) -> Tensor", "does not fit type 'int[]'"},
      {"aten::f(int[2] x=[1, 2, 3]) -> Tensor",
       "default '[1, 2, 3]' has 3 elements, for type 'int[2]'"},
      {"aten::f(int x=) -> Tensor", "expected a default value, found ')'"},
      {"aten::f(float x=1e) -> Tensor", "digits in the exponent"},
      {"aten::f(float x=1.5.2) -> Tensor", "expected ',' or ')'"},
      {"aten::f(int x=12abc) -> Tensor", "expected the end of the number"},
      {"aten::f(int x=99999999999999999999) -> Tensor",
       "does not fit in int64"},
      {"aten::f(Tensor x, Tensor x) -> Tensor",
       "column 19: duplicate parameter name 'x'"},
      {"aten::f(Tensor x, *, *, int y) -> Tensor", "second '*'"},
      {"aten::f(Tensor x, *) -> Tensor", "expected a parameter after '*'"},
      {"aten::f(Tensor x) -> Tensor extra junk",
       "expected the end of the schema after the returns, found 'junk'"},
      {"aten::f(Tensor x) -> (Tensor, Tensor",
       "expected ',' or ')' after a return"},
      {"aten::f(Tensor x) -> Tensor(a", "expected ')' to close the alias"},
      {"aten::f(Tensor x) -> Tensor y=1", "found '='"},
      {"aten::f(Tensor x) -> *", "expected a type, found '*'"},
      {"aten::f(\xff) -> Tensor", "column 9: expected a type, found byte 0xff"},
      {"aten::f(int[99999999999] x) -> Tensor", "list size too large"},
      {"aten::f(Tensor x) - > Tensor", "expected '->' after the parameters"},
  };
  ASSERT_GE(cases.size(), 15u);
  for (const Malformed& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<OpSchema> schema = ParseSchema(c.text);
    ASSERT_FALSE(schema.ok());
    EXPECT_EQ(schema.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(schema.status().message()), HasSubstr(c.message));
    EXPECT_THAT(std::string(schema.status().message()), StartsWith("column "));
  }
}

// A result's alias set says which argument's storage it shares; a set no
// parameter has (or a written result whose parameter is not written) is an
// inconsistent schema, refused with the column of the return.
TEST(ParseSchemaTest, ResultAliasSetsMustBeAParametersSet) {
  const std::vector<Malformed> cases = {
      {"x::g(Tensor(a) self) -> Tensor(b)",
       "column 25: return 0 is in alias set 'b', which no parameter has"},
      {"x::g(Tensor self) -> Tensor(a)",
       "column 22: return 0 is in alias set 'a', which no parameter has"},
      {"x::g(Tensor(a!) self) -> (Tensor(a!), Tensor(c!))",
       "column 39: return 1 is in alias set 'c', which no parameter has"},
      {"x::g(Tensor(a) self) -> Tensor(a!)",
       "column 25: return 0 is written (alias set 'a!'), but parameter 'self' "
       "of that set is not (write it 'Tensor(a!) self')"},
      {"x::g(Tensor(a) self) -> Tensor(b)[]", "alias set 'b'"},
  };
  for (const Malformed& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<OpSchema> schema = ParseSchema(c.text);
    ASSERT_FALSE(schema.ok());
    EXPECT_EQ(schema.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(schema.status().message()), HasSubstr(c.message));
  }
  // Consistent annotations still parse: a view, a written result, a
  // wildcard, a read-only result of a written parameter's set.
  MustParse("x::v(Tensor(a) self) -> Tensor(a)");
  MustParse("x::w(Tensor(a!) self) -> Tensor(a!)");
  MustParse("x::s(Tensor(a -> *) self) -> Tensor(*)[]");
  MustParse("x::r(Tensor(a!) self) -> Tensor(a)");
}

TEST(ParseSchemaTest, DeeplyNestedDefaultIsRefusedNotOverflowed) {
  std::string text =
      "aten::f(int[] x=" + std::string(100000, '[') + ") -> Tensor";
  absl::StatusOr<OpSchema> schema = ParseSchema(text);
  ASSERT_FALSE(schema.ok());
  EXPECT_THAT(std::string(schema.status().message()),
              HasSubstr("nested too deeply"));
}

// Random bytes, and random edits of real schemas (which reach deeper into
// the grammar), never crash the parser; every failure is InvalidArgument with
// a column.
TEST(ParseSchemaTest, FuzzNeverCrashes) {
  std::mt19937 random(20240607);
  const std::string alphabet =
      "aten::Tensor(a!)[]?*,->=. 0123456789-+eE'\"TrueFalseNone_|intfloat\t";
  std::vector<std::string> seeds;
  for (const std::string& name : RegisteredOps()) {
    seeds.push_back(SchemaToText(*LookupOp(name)->schema));
  }
  int parsed = 0;
  for (int iteration = 0; iteration < 100000; ++iteration) {
    std::string text;
    if (iteration % 2 == 0) {
      int length = static_cast<int>(random() % 64);
      for (int i = 0; i < length; ++i) {
        text += iteration % 4 == 0 ? static_cast<char>(random() % 256)
                                   : alphabet[random() % alphabet.size()];
      }
    } else {
      text = seeds[random() % seeds.size()];
      int edits = 1 + static_cast<int>(random() % 4);
      for (int e = 0; e < edits && !text.empty(); ++e) {
        size_t at = random() % text.size();
        switch (random() % 3) {
          case 0:
            text.erase(at, 1 + random() % 3);
            break;
          case 1:
            text.insert(at, 1, alphabet[random() % alphabet.size()]);
            break;
          default:
            text[at] = alphabet[random() % alphabet.size()];
            break;
        }
      }
    }
    absl::StatusOr<OpSchema> schema = ParseSchema(text);
    if (schema.ok()) {
      ++parsed;
      // Facts are computable on whatever parsed.
      schema->WrittenArguments();
      for (int r = 0; r < static_cast<int>(schema->returns.size()); ++r) {
        schema->AliasedArgument(r);
      }
      continue;
    }
    ASSERT_EQ(schema.status().code(), absl::StatusCode::kInvalidArgument)
        << text;
    ASSERT_THAT(std::string(schema.status().message()), StartsWith("column "))
        << text;
  }
  EXPECT_GT(parsed, 0);  // The edits sometimes keep a schema valid.
}

}  // namespace
}  // namespace ferry
