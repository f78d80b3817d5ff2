// wire::NodeReader reads a node as protobuf parses it, or leaves it to
// protobuf: protobuf's own parse of the same bytes is the oracle.
#include "passes/wire_node.h"

#include <functional>
#include <string>
#include <vector>

#include "ferry/v1/program.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/pipeline.h"
#include "tests/passes/test_programs.h"

namespace ferry {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using namespace testing_util;

// Whether the reader reads `bytes` as protobuf parses them (or leaves them
// to protobuf). `read` is set when the reader read them.
::testing::AssertionResult ReadsAsParsed(const std::string& bytes, bool& read) {
  const std::string differences = wire::DifferenceFromProtobuf(bytes, &read);
  if (differences.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differences;
}

// A request of one method: `node` (in wire form), then an output node.
std::string RequestWith(const std::string& node) {
  return Field(1, Field(1, Field(1, "f") + Field(2, node) +
                               Field(2, Field(1, "out") + Field(7, ""))));
}

// LowerWire of the request with `node` gives what Lower of the parsed
// request gives (both refuse it when protobuf does).
void ExpectLowersAsParsed(const std::string& node) {
  const std::string bytes = RequestWith(node);
  v1::LowerRequest request;
  if (request.ParseFromString(bytes))
    EXPECT_EQ(ResultText(LowerWire(bytes)), ResultText(Lower(request)));
  else
    EXPECT_EQ(LowerWire(bytes).status().code(),
              absl::StatusCode::kInvalidArgument);
}

// --- Every field of the schema ---------------------------------------------

// A field of a message within ferry.v1.Node: the fields that lead to it,
// from Node, then the field itself.
using FieldPath = std::vector<const FieldDescriptor*>;

std::vector<FieldPath> EveryFieldOfANode() {
  std::vector<FieldPath> paths;
  std::function<void(const Descriptor*, const FieldPath&)> walk =
      [&](const Descriptor* message, const FieldPath& prefix) {
        ASSERT_LT(prefix.size(), 8u) << "a message that contains itself";
        for (int i = 0; i < message->field_count(); ++i) {
          FieldPath path = prefix;
          path.push_back(message->field(i));
          paths.push_back(path);
          if (message->field(i)->message_type() != nullptr)
            walk(message->field(i)->message_type(), path);
        }
      };
  walk(v1::Node::descriptor(), {});
  return paths;
}

std::string PathText(const FieldPath& path) {
  std::string text = "Node";
  for (const FieldDescriptor* field : path) text += "." + field->name();
  return text;
}

// Sets `field` of `m` to a value that is not its default (twice when
// repeated): negative integers, which are ten bytes on the wire and cut to
// 32 bits where the field has them.
void SetValue(Message& m, const FieldDescriptor* field) {
  const Reflection* r = m.GetReflection();
  for (int k = 0; k < (field->is_repeated() ? 2 : 1); ++k) {
    const bool add = field->is_repeated();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        add ? r->AddInt32(&m, field, -2 - k) : r->SetInt32(&m, field, -2);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        add ? r->AddInt64(&m, field, -5 - k) : r->SetInt64(&m, field, -5);
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64:
      case FieldDescriptor::CPPTYPE_FLOAT:
        FAIL() << field->full_name() << ": a type no node field had";
      case FieldDescriptor::CPPTYPE_DOUBLE:
        add ? r->AddDouble(&m, field, 1.5) : r->SetDouble(&m, field, 1.5);
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        add ? r->AddBool(&m, field, true) : r->SetBool(&m, field, true);
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        add ? r->AddEnumValue(&m, field, 1) : r->SetEnumValue(&m, field, 1);
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        add ? r->AddString(&m, field, "é") : r->SetString(&m, field, "é");
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE:
        add ? r->AddMessage(&m, field) : r->MutableMessage(&m, field);
        break;
    }
  }
}

// A node with the last field of `path` set, and the messages on the way.
v1::Node NodeWith(const FieldPath& path) {
  v1::Node node;
  Message* m = &node;
  for (size_t k = 0; k + 1 < path.size(); ++k) {
    const Reflection* r = m->GetReflection();
    m = path[k]->is_repeated() ? r->AddMessage(m, path[k])
                               : r->MutableMessage(m, path[k]);
  }
  SetValue(*m, path.back());
  return node;
}

// Every field a node can have is read in place, as protobuf reads it, and a
// node with it lowers from the wire as from the parsed request. A field
// added to the schema and not to the reader fails here.
TEST(WireNodeTest, EveryFieldOfTheSchemaIsReadInPlaceAsProtobufReadsIt) {
  const std::vector<FieldPath> paths = EveryFieldOfANode();
  for (const FieldPath& path : paths) {
    const std::string bytes = NodeWith(path).SerializeAsString();
    bool read = false;
    EXPECT_TRUE(ReadsAsParsed(bytes, read)) << PathText(path);
    EXPECT_TRUE(read) << PathText(path) << " is left to protobuf";
    ExpectLowersAsParsed(bytes);
  }
  EXPECT_GE(paths.size(), 60u);
}

// The same with every field set at once, where a oneof allows it: a call
// with one argument of each kind.
TEST(WireNodeTest, ANodeWithManyFieldsIsReadAsProtobufReadsIt) {
  v1::Node node;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"(
name: "n" delegation_tag: "d0" source { file: "m.py" line: 7 name: "f" }
call {
  op: "aten::cat" schema: "aten::cat(Tensor[] tensors, int dim=0) -> Tensor"
  at_load: true
  args { name: "tensors" values { values { node: "a" }
                                  values { element { node: "t" index: 1 } } } }
  args { int_value: -3 } args { float_value: 0.25 } args { bool_value: true }
  args { ints { values: [1, -2, 300] } } args { dtype: BF16 } args { none {} }
  args { string_value: "s" } args { value: "b" }
  args { element { node: "t" index: 0 } }
}
tuple {
  elements { dtype: F16 sizes: [2, 3] strides: [3, 1] storage_offset: 4
             device { type: "cuda" index: 1 }
             memory { arena: 1 offset: 64 size: 12 planned: true } }
  elements { dtype: I64 }
}
)",
                                                            &node));
  bool read = false;
  EXPECT_TRUE(ReadsAsParsed(node.SerializeAsString(), read));
  EXPECT_TRUE(read);
}

// --- What the reader leaves to protobuf --------------------------------------

// Node bytes, each with what they show.
using Cases = std::vector<std::pair<std::string, std::string>>;

// Each case is read in place when `in_place` (else left to protobuf), as
// protobuf reads it, and lowers in a request as the parsed request does.
void ExpectEachCase(const Cases& cases, bool in_place) {
  for (const auto& [what, bytes] : cases) {
    SCOPED_TRACE(what);
    bool read = !in_place;
    EXPECT_TRUE(ReadsAsParsed(bytes, read));
    EXPECT_EQ(read, in_place);
    ExpectLowersAsParsed(bytes);
  }
}

// What has more than one reading, or none, is not read in place; the
// request still lowers as protobuf reads it (or is refused as protobuf
// refuses it).
TEST(WireNodeTest, WhatHasMoreThanOneReadingIsLeftToProtobuf) {
  const std::string call = Field(4, Field(1, "aten::sin"));
  const std::string tensor = Field(10, "\x08\x01\x12\x01\x04");  // F32 [4]
  const Cases cases = {
      {"a name twice", Field(1, "a") + call + tensor + Field(1, "b")},
      {"two kinds", Field(1, "a") + Field(2, "") + call + tensor},
      {"two results", Field(1, "a") + call + tensor + std::string("\x60\x01")},
      {"an argument of two kinds",
       Field(1, "a") + Field(4, Field(2, Field(2, "x") + "\x28\x01")) + tensor},
      {"a field the schema does not have",
       Field(1, "a") + call + Field(15, "z")},
      {"a string written as a number", std::string("\x08\x01") + call + tensor},
      {"a name that is not UTF-8", Field(1, "\xff") + call + tensor},
      {"sizes given on both sides of the strides",
       Field(1, "a") + call +
           Field(10, "\x12\x01\x02\x1a\x01\x01\x12\x01\x03")},
      {"a call that ends inside its op",
       Field(1, "a") + std::string("\x22\x03\x0a\x05") + "aten::sin"},
      {"a truncated node", (Field(1, "a") + call).substr(0, 8)},
      {"a zero tag", Field(1, "a") + std::string(1, '\0')},
      // Padded varints: protobuf's parser reads a tag or a length of at
      // most 5 bytes (the stream alone would take 10), and a 10-byte value
      // drops what is past its 64th bit.
      {"a length padded past 5 bytes",
       std::string("\x5a\x80\x80\x80\x80\x80\x80\x80\x00", 9)},
      {"a tag padded to 3 bytes",
       std::string("\x8a\x80\x00\x01\x61", 5) + call + tensor},
      {"a value with bits past the 64th",
       Field(1, "a") + call + "\x60\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f"},
  };
  ExpectEachCase(cases, /*in_place=*/false);
}

// Repeated integers written one by one rather than packed, an empty node,
// and fields in any order are each read as protobuf reads them.
TEST(WireNodeTest, WhatHasOneReadingIsReadInPlace) {
  const Cases cases = {
      {"sizes unpacked", Field(1, "a") + Field(10, "\x08\x01\x10\x04\x10\x05")},
      {"sizes packed in two runs",
       Field(1, "a") + Field(10, "\x08\x01\x12\x01\x04\x12\x01\x05")},
      {"an empty node", ""},
      {"the name last", Field(4, Field(1, "aten::sin")) + Field(1, "a")},
      {"a bool written as 2", Field(4, std::string("\x20\x02"))},
      {"a float argument that is NaN",
       Field(4, Field(2, std::string("\x31\0\0\0\0\0\0\xf8\x7f", 9)))},
      // call { args { values { values { node: "" } } } }: a reference that
      // names "", set, is not one left empty.
      {"a reference naming the empty string",
       Field(4, Field(2, Field(4, Field(1, Field(1, "")))))},
  };
  ExpectEachCase(cases, /*in_place=*/true);
}

}  // namespace
}  // namespace ferry
