// Every structural problem import can find is a diagnostic with a stable
// code naming the node — one case per code.
#include "ferry/v1/program.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/diagnostic_codes.h"
#include "passes/proto_io.h"
#include "passes/schema.h"

namespace ferry {
namespace {

struct ImportCase {
  const char* name;
  const char* code;
  const char* node;  // first node named; "" for none
  const char* program;
};

#define T "tensor { dtype: F32 sizes: 2 }"
#define IN(n) "nodes { name: \"" n "\" input { kind: USER_INPUT } " T " }"
#define OUT(v) \
  "nodes { name: \"output\" output { values { value: \"" v "\" } } }"
#define METHOD(body) "methods { name: \"m\" " body " }"

const ImportCase kCases[] = {
    {"EmptyName", codes::kEmptyName, "#1",
     METHOD(
         IN("a") "nodes { call { op: \"aten::sin\" args { value: \"a\" } } " T
                 " }" OUT("a"))},
    {"DuplicateName", codes::kDuplicateName, "a",
     METHOD(IN("a") IN("a") OUT("a"))},
    {"DanglingReference", codes::kDanglingReference, "s",
     METHOD(IN("a") "nodes { name: \"s\" call { op: \"aten::sin\" args { "
                    "value: \"b\" } } " T " }" OUT("s"))},
    // A nameless node is called "#1" in messages, but no node can read it
    // by that name: import resolves only given names.
    {"StandInNameIsNotAName", codes::kDanglingReference, "s",
     METHOD(IN("a") "nodes { call { op: \"aten::sin\" args { value: \"a\" "
                    "} } " T " } nodes { name: \"s\" call { op: "
                    "\"aten::cos\" args { value: \"#1\" } } " T " }" OUT("s"))},
    {"ForwardReference", codes::kForwardReference, "s",
     METHOD(IN("a") "nodes { name: \"s\" call { op: \"aten::sin\" args { "
                    "value: \"c\" } } " T " }"
                    "nodes { name: \"c\" call { op: \"aten::cos\" args { "
                    "value: \"a\" } } " T " }" OUT("s"))},
    {"SelfReference", codes::kForwardReference, "s",
     METHOD(IN("a") "nodes { name: \"s\" call { op: \"aten::sin\" args { "
                    "value: \"s\" } } " T " }" OUT("s"))},
    {"MissingOutput", codes::kMissingOutput, "", METHOD(IN("a"))},
    {"OutputNotLast", codes::kOutputNotLast, "output",
     METHOD(IN("a") OUT("a") IN("b"))},
    {"GetItemOfNonTuple", codes::kGetItemOfNonTuple, "g",
     METHOD(IN("a") "nodes { name: \"g\" getitem { source: \"a\" index: 0 } " T
                    " }" OUT("g"))},
    {"TupleIndexOutOfRange", codes::kTupleIndexOutOfRange, "g",
     METHOD(IN(
         "a") "nodes { name: \"d\" delegate { module: \"mod\" args { value: "
              "\"a\" } } tuple { elements { dtype: F32 sizes: 2 } } }"
              "nodes { name: \"g\" getitem { source: \"d\" index: 3 } " T
              " }" OUT(
                  "g")) " modules { id: \"mod\" graph { name: \"mod\" " IN("x")
         OUT("x") " } input_layouts { dtype: F32 sizes: 2 } returns_tuple: "
                  "true }"},
    {"MissingModule", codes::kMissingModule, "d",
     METHOD(IN("a") "nodes { name: \"d\" delegate { module: \"nowhere\" args { "
                    "value: \"a\" } } " T " }" OUT("d"))},
    {"MissingConstant", codes::kMissingConstant, "w",
     METHOD("nodes { name: \"w\" input { kind: PARAMETER target: \"w\" } " T
            " }" OUT("w"))},
    {"UnknownOperator", codes::kUnknownOperator, "s",
     METHOD(IN("a") "nodes { name: \"s\" call { op: \"aten::frobnicate\" args "
                    "{ value: \"a\" } } " T " }" OUT("s"))},
    {"BadSchema", codes::kBadSchema, "s",
     METHOD(IN("a") "nodes { name: \"s\" call { op: \"my::op\" args { value: "
                    "\"a\" } schema: \"my::op(Tensor self -> Tensor\" } " T
                    " }" OUT("s"))},
    {"SchemaNamesAnotherOperator", codes::kBadSchema, "s",
     METHOD(IN("a") "nodes { name: \"s\" call { op: \"my::op\" args { value: "
                    "\"a\" } schema: \"my::other(Tensor self) -> Tensor\" } " T
                    " }" OUT("s"))},
    {"MissingNodeKind", codes::kMissingNodeKind, "k",
     METHOD(IN("a") "nodes { name: \"k\" " T " }" OUT("a"))},
    {"BadResult", codes::kBadResult, "a",
     METHOD("nodes { name: \"a\" input { kind: USER_INPUT } }" OUT("a"))},
    {"BadInputKind", codes::kBadInputKind, "a",
     METHOD("nodes { name: \"a\" input { } " T " }" OUT("a"))},
    {"NoMethods", codes::kNoMethods, "", ""},
    {"TupleUsedAsValue", codes::kTupleUsedAsValue, "s",
     METHOD(IN(
         "a") "nodes { name: \"d\" delegate { module: \"mod\" args { value: "
              "\"a\" } } tuple { elements { dtype: F32 sizes: 2 } } }"
              "nodes { name: \"s\" call { op: \"aten::sin\" args { value: "
              "\"d\" } } " T " }" OUT(
                  "s")) " modules { id: \"mod\" graph { name: \"mod\" " IN("x")
         OUT("x") " } input_layouts { dtype: F32 sizes: 2 } returns_tuple: "
                  "true }"},
    {"BadDType", codes::kBadDType, "a",
     METHOD("nodes { name: \"a\" input { kind: USER_INPUT } tensor { sizes: 2 "
            "} }" OUT("a"))},
    {"UnknownDeviceType", codes::kBadDevice, "a",
     METHOD("nodes { name: \"a\" input { kind: USER_INPUT } tensor { dtype: "
            "F32 sizes: 2 device { type: \"tpu\" } } }" OUT("a"))},
    {"NegativeDeviceIndex", codes::kBadDevice, "a",
     METHOD(
         "nodes { name: \"a\" input { kind: USER_INPUT } tensor { dtype: "
         "F32 sizes: 2 device { type: \"cuda\" index: -65535 } } }" OUT("a"))},
    // A Device keeps 16 bits of index (passes/ir.h, Device::kMaxIndex).
    {"DeviceIndexOverTheLargest", codes::kBadDevice, "a",
     METHOD(
         "nodes { name: \"a\" input { kind: USER_INPUT } tensor { dtype: "
         "F32 sizes: 2 device { type: \"cuda\" index: 32768 } } }" OUT("a"))},
    {"DuplicateModule", codes::kDuplicateModule, "mod",
     METHOD(IN("a") OUT(
         "a")) " modules { id: \"mod\" graph { name: \"mod\" " IN("x")
         OUT("x") " } }"
                  " modules { id: \"mod\" graph { name: \"mod\" " IN("x")
                      OUT("x") " } }"},
};

class ImportTest : public testing::TestWithParam<ImportCase> {};

TEST_P(ImportTest, ReportsTheCodeAndTheNode) {
  const ImportCase& c = GetParam();
  v1::Program proto;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(c.program, &proto))
      << c.program;
  Diagnostics diagnostics;
  ImportProgram(proto, diagnostics);
  ASSERT_TRUE(diagnostics.HasErrors()) << c.name;
  const Diagnostic* found = nullptr;
  for (const Diagnostic& d : diagnostics.items())
    if (d.code == c.code && !found) found = &d;
  ASSERT_NE(found, nullptr) << c.name << ": no " << c.code << " in\n"
                            << FormatDiagnosticsText(diagnostics, "case");
  EXPECT_EQ(found->severity, Severity::kError);
  if (std::string(c.node).empty()) {
    EXPECT_TRUE(found->nodes.empty()) << found->nodes[0];
  } else {
    ASSERT_FALSE(found->nodes.empty());
    EXPECT_EQ(found->nodes[0], c.node);
  }
  EXPECT_FALSE(found->message.empty());
}

INSTANTIATE_TEST_SUITE_P(Codes, ImportTest, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<ImportCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(ImportMessages, DanglingReferenceSaysWhatIsMissing) {
  v1::Program proto;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      METHOD(IN("a") "nodes { name: \"relu_1\" call { op: \"aten::relu_\" args "
                     "{ value: \"missing\" } } " T " }" OUT("relu_1")),
      &proto));
  Diagnostics diagnostics;
  ImportProgram(proto, diagnostics);
  ASSERT_FALSE(diagnostics.empty());
  EXPECT_EQ(FormatDiagnosticsText(diagnostics, "f.textproto"),
            "f.textproto: method 'm': node 'relu_1': error[FERRY-E0102]: "
            "reference to undefined value 'missing'\n");
}

// A call's target points at the registry's name when it is exactly that
// name and the call has no schema text of its own; any other target (the
// ".default" spelling of a default overload, an operator with its own
// schema, an unknown one) is the node's own text, read back unchanged.
TEST(ImportTargets, ACallOfARegisteredNameSharesTheRegistrysName) {
  v1::Program proto;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      METHOD(IN("a") "nodes { name: \"s\" call { op: \"aten::add.Tensor\" "
                     "args { value: \"a\" } args { value: \"a\" } } " T " }"
                     "nodes { name: \"r\" call { op: \"aten::relu.default\" "
                     "args { value: \"s\" } } " T " }"
                     "nodes { name: \"q\" call { op: \"aten::relu\" schema: "
                     "\"aten::relu(Tensor self) -> Tensor\" args { value: "
                     "\"r\" } } " T " }" OUT("q")),
      &proto));
  Diagnostics diagnostics;
  Program program = ImportProgram(proto, diagnostics);
  ASSERT_FALSE(diagnostics.HasErrors());
  const std::vector<Node>& nodes = program.methods[0].nodes;
  const OpInfo* add = LookupOp("aten::add.Tensor");
  ASSERT_NE(add, nullptr);
  EXPECT_TRUE(nodes[1].target.lasting());
  EXPECT_EQ(&nodes[1].target.str(), &add->name);
  EXPECT_FALSE(nodes[2].target.lasting());  // aten::relu, spelt otherwise
  EXPECT_EQ(nodes[2].target, "aten::relu.default");
  EXPECT_EQ(nodes[2].schema.get(), LookupOp("aten::relu")->schema.get());
  EXPECT_FALSE(nodes[3].target.lasting());  // its own schema
  EXPECT_EQ(nodes[3].target, "aten::relu");
}

}  // namespace
}  // namespace ferry
