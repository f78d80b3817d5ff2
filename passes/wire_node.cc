#include "passes/wire_node.h"

#include <bit>
#include <climits>
#include <memory>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/stubs/common.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/wire_format_lite.h"

namespace ferry::wire {
namespace {

using google::protobuf::internal::WireFormatLite;
constexpr int kVarint = WireFormatLite::WIRETYPE_VARINT;
constexpr int kFixed64 = WireFormatLite::WIRETYPE_FIXED64;
constexpr int kLength = WireFormatLite::WIRETYPE_LENGTH_DELIMITED;

// Whether `length` bytes at `data` are UTF-8, as protobuf checks a proto3
// string when it parses one. ASCII, what names and operators almost always
// are, is answered here: a string is UTF-8 when what follows its ASCII
// prefix is.
bool IsUtf8(const char* data, int length) {
  for (int i = 0; i < length; ++i)
    if (static_cast<unsigned char>(data[i]) >= 0x80)
      return google::protobuf::internal::IsStructurallyValidUTF8(data + i,
                                                                 length - i);
  return true;
}

// Field `number`'s bit in a set of field numbers (all the schema's are
// under 32).
constexpr uint32_t Bit(int number) { return uint32_t{1} << number; }

}  // namespace

// One node's reading: protobuf's stream over its bytes, and the reader's
// pools. Each Read* reads a field's value, its wire type given; false when
// it is not what the schema says or not in the bytes.
class NodeReader::Fields {
 public:
  Fields(std::string_view bytes, NodeReader& reader)
      : bytes_(bytes),
        in_(reinterpret_cast<const uint8_t*>(bytes.data()),
            static_cast<int>(bytes.size())),
        end_(static_cast<int>(bytes.size())),
        reader_(reader) {}

  bool ReadNode(NodeView& n) {
    return Loop([&](int number, int type) {
      switch (number) {
        case v1::Node::kNameFieldNumber:
          return ReadString(type, n.name_);
        case v1::Node::kInputFieldNumber:
          return Kind(n, number) && ReadInput(type, n.input_);
        case v1::Node::kConstantFieldNumber:
          return Kind(n, number) && ReadConstant(type, n.constant_);
        case v1::Node::kCallFieldNumber:
          return Kind(n, number) && ReadCall(type, n.call_);
        case v1::Node::kDelegateFieldNumber:
          return Kind(n, number) && ReadDelegate(type, n.call_);
        case v1::Node::kGetitemFieldNumber:
          return Kind(n, number) && ReadGetItem(type, n.getitem_);
        case v1::Node::kOutputFieldNumber:
          return Kind(n, number) && ReadOutput(type, n.call_);
        case v1::Node::kTensorFieldNumber:
          return Result(n, number) && ReadSpec(type, n.tensor_);
        case v1::Node::kTupleFieldNumber:
          return Result(n, number) && ReadTuple(type, n.tuple_);
        case v1::Node::kScalarFieldNumber:
          return Result(n, number) && ReadInt32(type, n.scalar_);
        case v1::Node::kDelegationTagFieldNumber:
          return ReadString(type, n.delegation_tag_);
        case v1::Node::kSourceFieldNumber:
          n.has_source_ = true;
          return ReadSource(type, n.source_);
      }
      return false;
    });
  }

 private:
  // Sets a node's oneofs, each at most once.
  static bool Kind(NodeView& n, int number) {
    if (n.kind_ != v1::Node::KIND_NOT_SET) return false;
    n.kind_ = static_cast<v1::Node::KindCase>(number);
    return true;
  }
  static bool Result(NodeView& n, int number) {
    if (n.result_ != v1::Node::RESULT_NOT_SET) return false;
    n.result_ = static_cast<v1::Node::ResultCase>(number);
    return true;
  }

  bool ReadInput(int type, InputView& input) {
    return Message(type, [&](int number, int field_type) {
      switch (number) {
        case v1::InputNode::kKindFieldNumber:
          return ReadInt32(field_type, input.kind_);
        case v1::InputNode::kTargetFieldNumber:
          return ReadString(field_type, input.target_);
      }
      return false;
    });
  }

  bool ReadConstant(int type, ConstantView& constant) {
    return Message(type, [&](int number, int field_type) {
      return number == v1::ConstantNode::kNameFieldNumber &&
             ReadString(field_type, constant.name_);
    });
  }

  bool ReadCall(int type, CallView& call) {
    const uint32_t repeated = Bit(v1::CallNode::kArgsFieldNumber);
    return Message(type, repeated, [&](int number, int field_type) {
      switch (number) {
        case v1::CallNode::kOpFieldNumber:
          return ReadString(field_type, call.op_);
        case v1::CallNode::kArgsFieldNumber:
          return ReadArgument(field_type, call.args_);
        case v1::CallNode::kSchemaFieldNumber:
          return ReadString(field_type, call.schema_);
        case v1::CallNode::kAtLoadFieldNumber:
          return ReadBool(field_type, call.at_load_);
      }
      return false;
    });
  }

  bool ReadDelegate(int type, CallView& delegate) {
    const uint32_t repeated = Bit(v1::DelegateNode::kArgsFieldNumber);
    return Message(type, repeated, [&](int number, int field_type) {
      switch (number) {
        case v1::DelegateNode::kModuleFieldNumber:
          return ReadString(field_type, delegate.op_);
        case v1::DelegateNode::kArgsFieldNumber:
          return ReadArgument(field_type, delegate.args_);
      }
      return false;
    });
  }

  bool ReadOutput(int type, CallView& output) {
    const uint32_t repeated = Bit(v1::OutputNode::kValuesFieldNumber);
    return Message(type, repeated, [&](int number, int field_type) {
      return number == v1::OutputNode::kValuesFieldNumber &&
             ReadArgument(field_type, output.args_);
    });
  }

  bool ReadGetItem(int type, GetItemView& getitem) {
    return Message(type, [&](int number, int field_type) {
      switch (number) {
        case v1::GetItemNode::kSourceFieldNumber:
          return ReadString(field_type, getitem.source_);
        case v1::GetItemNode::kIndexFieldNumber:
          return ReadInt32(field_type, getitem.index_);
      }
      return false;
    });
  }

  // One more argument of `args`.
  bool ReadArgument(int type, Run<ArgumentView>& args) {
    ArgumentView* a = Append(reader_.args_, args);
    if (a == nullptr) return false;
    return Message(type, [&](int number, int field_type) {
      if (number == v1::Argument::kNameFieldNumber)
        return ReadString(field_type, a->name_);
      if (a->kind_ != v1::Argument::KIND_NOT_SET) return false;  // a oneof
      a->kind_ = static_cast<v1::Argument::KindCase>(number);
      // Each case first makes its member of the view's union the one set.
      switch (number) {
        case v1::Argument::kValueFieldNumber:
        case v1::Argument::kStringValueFieldNumber:
          a->text_ = std::string_view();
          return ReadString(field_type, a->text_);
        case v1::Argument::kElementFieldNumber:
          a->element_ = ElementView();
          return ReadElement(field_type, a->element_);
        case v1::Argument::kValuesFieldNumber:
          a->values_ = ValueListView();
          return Message(field_type, Bit(v1::ValueList::kValuesFieldNumber),
                         [&](int list_number, int list_type) {
                           return list_number ==
                                      v1::ValueList::kValuesFieldNumber &&
                                  ReadValueRef(list_type, a->values_.values_);
                         });
        case v1::Argument::kIntValueFieldNumber:
        case v1::Argument::kBoolValueFieldNumber:
        case v1::Argument::kDtypeFieldNumber:
          a->int_value_ = 0;
          return ReadInt64(field_type, a->int_value_);
        case v1::Argument::kFloatValueFieldNumber: {
          uint64_t bits = 0;
          if (field_type != kFixed64 || !in_.ReadLittleEndian64(&bits))
            return false;
          a->float_value_ = std::bit_cast<double>(bits);
          return true;
        }
        case v1::Argument::kIntsFieldNumber:
          a->ints_ = IntListView();
          return Message(field_type, Bit(v1::IntList::kValuesFieldNumber),
                         [&](int list_number, int list_type) {
                           return list_number ==
                                      v1::IntList::kValuesFieldNumber &&
                                  ReadInts(list_type, a->ints_.values_);
                         });
        case v1::Argument::kNoneFieldNumber:
          return Message(field_type, [](int, int) { return false; });
      }
      return false;
    });
  }

  bool ReadValueRef(int type, Run<ValueRefView>& refs) {
    ValueRefView* r = Append(reader_.refs_, refs);
    if (r == nullptr) return false;
    return Message(type, [&](int number, int field_type) {
      if (r->ref_ != v1::ValueRef::REF_NOT_SET) return false;  // a oneof
      r->ref_ = static_cast<v1::ValueRef::RefCase>(number);
      switch (number) {
        case v1::ValueRef::kNodeFieldNumber:
          return ReadString(field_type, r->node_);
        case v1::ValueRef::kElementFieldNumber:
          return ReadElement(field_type, r->element_);
      }
      return false;
    });
  }

  bool ReadElement(int type, ElementView& element) {
    return Message(type, [&](int number, int field_type) {
      switch (number) {
        case v1::ElementRef::kNodeFieldNumber:
          return ReadString(field_type, element.node_);
        case v1::ElementRef::kIndexFieldNumber:
          return ReadInt32(field_type, element.index_);
      }
      return false;
    });
  }

  bool ReadTuple(int type, TupleView& tuple) {
    const uint32_t repeated = Bit(v1::TupleSpec::kElementsFieldNumber);
    return Message(type, repeated, [&](int number, int field_type) {
      if (number != v1::TupleSpec::kElementsFieldNumber) return false;
      SpecView* spec = Append(reader_.specs_, tuple.elements_);
      return spec != nullptr && ReadSpec(field_type, *spec);
    });
  }

  bool ReadSpec(int type, SpecView& spec) {
    const uint32_t repeated = Bit(v1::TensorSpec::kSizesFieldNumber) |
                              Bit(v1::TensorSpec::kStridesFieldNumber);
    return Message(type, repeated, [&](int number, int field_type) {
      switch (number) {
        case v1::TensorSpec::kDtypeFieldNumber:
          return ReadInt32(field_type, spec.dtype_);
        case v1::TensorSpec::kSizesFieldNumber:
          return ReadInts(field_type, spec.sizes_);
        case v1::TensorSpec::kStridesFieldNumber:
          return ReadInts(field_type, spec.strides_);
        case v1::TensorSpec::kStorageOffsetFieldNumber:
          return ReadInt64(field_type, spec.storage_offset_);
        case v1::TensorSpec::kDeviceFieldNumber:
          spec.has_device_ = true;
          return ReadDevice(field_type, spec.device_);
        case v1::TensorSpec::kMemoryFieldNumber:
          spec.has_memory_ = true;
          return ReadMemory(field_type, spec.memory_);
      }
      return false;
    });
  }

  bool ReadDevice(int type, DeviceView& device) {
    return Message(type, [&](int number, int field_type) {
      switch (number) {
        case v1::Device::kTypeFieldNumber:
          return ReadString(field_type, device.type_);
        case v1::Device::kIndexFieldNumber:
          return ReadInt32(field_type, device.index_);
      }
      return false;
    });
  }

  bool ReadMemory(int type, MemoryView& memory) {
    return Message(type, [&](int number, int field_type) {
      switch (number) {
        case v1::MemoryPlacement::kArenaFieldNumber:
          return ReadInt32(field_type, memory.arena_);
        case v1::MemoryPlacement::kOffsetFieldNumber:
          return ReadInt64(field_type, memory.offset_);
        case v1::MemoryPlacement::kSizeFieldNumber:
          return ReadInt64(field_type, memory.size_);
        case v1::MemoryPlacement::kPlannedFieldNumber:
          return ReadBool(field_type, memory.planned_);
      }
      return false;
    });
  }

  bool ReadSource(int type, SourceView& source) {
    return Message(type, [&](int number, int field_type) {
      switch (number) {
        case v1::SourceLocation::kFileFieldNumber:
          return ReadString(field_type, source.file_);
        case v1::SourceLocation::kLineFieldNumber:
          return ReadInt32(field_type, source.line_);
        case v1::SourceLocation::kNameFieldNumber:
          return ReadString(field_type, source.name_);
      }
      return false;
    });
  }

  // Reads the fields up to end_, each with `field(number, wire_type)`,
  // which reads its value. True when every field reads and the last ends
  // at end_. (The stream's own limits would do the same, at the cost of a
  // call into protobuf's library for each.) A field not in `repeated` is
  // read at most once: a second one is left to protobuf.
  template <typename Field>
  bool Loop(Field&& field, uint32_t repeated = 0) {
    uint32_t seen = 0;  // the fields read, but repeated ones
    while (in_.CurrentPosition() < end_) {
      const int at = in_.CurrentPosition();
      const uint32_t tag = in_.ReadTag();
      const int number =
          static_cast<int>(WireFormatLite::GetTagFieldNumber(tag));
      // Field numbers past 31 are none of the schema's (Bit's); the
      // tag of one up to 31 takes at most 2 bytes, unless it is padded
      // (which protobuf reads only up to 5 bytes: left to it).
      if (number == 0 || number > 31 || in_.CurrentPosition() - at > 2 ||
          (seen & Bit(number)) != 0)
        return false;
      seen |= Bit(number) & ~repeated;
      if (!field(number,
                 static_cast<int>(WireFormatLite::GetTagWireType(tag))) ||
          in_.CurrentPosition() > end_)
        return false;
    }
    return in_.CurrentPosition() == end_;
  }

  // A length-delimited value: its length, then `read()` of it, which ends
  // where it ends.
  template <typename Read>
  bool Delimited(int type, Read&& read) {
    int length = 0;
    if (!ReadLength(type, length)) return false;
    const int outer = end_;
    end_ = in_.CurrentPosition() + length;
    const bool ok = read();
    end_ = outer;
    return ok;
  }

  // A submessage: its fields, as Loop reads them (`repeated`: the fields
  // that may come more than once).
  template <typename Field>
  bool Message(int type, uint32_t repeated, Field&& field) {
    return Delimited(type, [&] { return Loop(field, repeated); });
  }
  template <typename Field>
  bool Message(int type, Field&& field) {
    return Message(type, 0, field);
  }

  // The length of a length-delimited value, which must end by end_. As
  // protobuf's parser reads it: at most 5 bytes (the stream alone would
  // take a padded one of up to 10).
  bool ReadLength(int type, int& length) {
    const int at = in_.CurrentPosition();
    return type == kLength && in_.ReadVarintSizeAsInt(&length) &&
           in_.CurrentPosition() - at <= 5 &&
           length <= end_ - in_.CurrentPosition();
  }

  bool ReadString(int type, std::string_view& value) {
    int length = 0;
    if (!ReadLength(type, length)) return false;
    const char* data = bytes_.data() + in_.CurrentPosition();
    if (!IsUtf8(data, length)) return false;
    value = std::string_view(data, static_cast<size_t>(length));
    return in_.Skip(length);
  }

  // Integers as protobuf's parser reads them: a varint, cut to the field's
  // width. One of 10 bytes whose last has bits past the 64th is left to
  // protobuf (which drops them, as the stream does, but need not).
  bool ReadInt64(int type, int64_t& value) {
    uint64_t v = 0;
    const int at = in_.CurrentPosition();
    if (type != kVarint || !in_.ReadVarint64(&v)) return false;
    if (in_.CurrentPosition() - at == 10 &&
        static_cast<unsigned char>(bytes_[in_.CurrentPosition() - 1]) > 1)
      return false;
    value = static_cast<int64_t>(v);
    return true;
  }
  template <typename Int>
  bool ReadInt32(int type, Int& value) {
    int64_t v = 0;
    if (!ReadInt64(type, v)) return false;
    value = static_cast<int32_t>(v);
    return true;
  }
  bool ReadBool(int type, bool& value) {
    int64_t v = 0;
    if (!ReadInt64(type, v)) return false;
    value = v != 0;
    return true;
  }

  // More of a repeated int64 field: one value, or a packed run of them.
  bool ReadInts(int type, Run<int64_t>& run) {
    std::vector<int64_t>& pool = reader_.ints_;
    if (type == kVarint) {
      int64_t* value = Append(pool, run);
      return value != nullptr && ReadInt64(type, *value);
    }
    return Delimited(type, [&] {
      while (in_.CurrentPosition() < end_) {
        int64_t* value = Append(pool, run);
        if (value == nullptr || !ReadInt64(kVarint, *value)) return false;
      }
      return in_.CurrentPosition() == end_;
    });
  }

  // A new last entry of `run`, at the end of `pool`; null when the run is
  // not at the end (the field's values came apart, a case left to protobuf).
  template <typename T>
  static T* Append(std::vector<T>& pool, Run<T>& run) {
    if (run.count_ == 0) {
      run.pool_ = &pool;
      run.first_ = static_cast<uint32_t>(pool.size());
    } else if (run.first_ + run.count_ != pool.size()) {
      return nullptr;
    }
    ++run.count_;
    return &pool.emplace_back();
  }

  std::string_view bytes_;
  google::protobuf::io::CodedInputStream in_;
  int end_;  // where the message or packed run being read ends
  NodeReader& reader_;
};

const NodeView* NodeReader::Read(std::string_view bytes) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return nullptr;
  // Made afresh where it is (assigning a new one would build it elsewhere
  // and copy it over, a cost that shows for each node).
  std::destroy_at(&node_);
  std::construct_at(&node_);
  args_.clear();
  refs_.clear();
  specs_.clear();
  ints_.clear();
  Fields fields(bytes, *this);
  return fields.ReadNode(node_) ? &node_ : nullptr;
}

// --- The view as a message -------------------------------------------------

namespace {

void ElementFrom(const ElementView& v, v1::ElementRef* p) {
  p->set_node(std::string(v.node()));
  p->set_index(v.index());
}

void SpecFrom(const SpecView& v, v1::TensorSpec* p) {
  p->set_dtype(static_cast<v1::DType>(v.dtype()));
  for (int64_t size : v.sizes()) p->add_sizes(size);
  for (int64_t stride : v.strides()) p->add_strides(stride);
  p->set_storage_offset(v.storage_offset());
  if (v.has_device()) {
    p->mutable_device()->set_type(std::string(v.device().type()));
    p->mutable_device()->set_index(v.device().index());
  }
  if (v.has_memory()) {
    v1::MemoryPlacement* memory = p->mutable_memory();
    memory->set_arena(v.memory().arena());
    memory->set_offset(v.memory().offset());
    memory->set_size(v.memory().size());
    memory->set_planned(v.memory().planned());
  }
}

void ArgumentFrom(const ArgumentView& v, v1::Argument* p) {
  p->set_name(std::string(v.name()));
  switch (v.kind_case()) {
    case v1::Argument::kValue:
      p->set_value(std::string(v.value()));
      break;
    case v1::Argument::kElement:
      ElementFrom(v.element(), p->mutable_element());
      break;
    case v1::Argument::kValues:
      p->mutable_values();
      for (const ValueRefView& r : v.values().values()) {
        v1::ValueRef* ref = p->mutable_values()->add_values();
        if (r.ref_ == v1::ValueRef::kElement)
          ElementFrom(r.element(), ref->mutable_element());
        else if (r.ref_ == v1::ValueRef::kNode)
          ref->set_node(std::string(r.node()));
      }
      break;
    case v1::Argument::kIntValue:
      p->set_int_value(v.int_value());
      break;
    case v1::Argument::kFloatValue:
      p->set_float_value(v.float_value());
      break;
    case v1::Argument::kBoolValue:
      p->set_bool_value(v.bool_value());
      break;
    case v1::Argument::kInts:
      p->mutable_ints();
      for (int64_t value : v.ints().values())
        p->mutable_ints()->add_values(value);
      break;
    case v1::Argument::kDtype:
      p->set_dtype(static_cast<v1::DType>(v.dtype()));
      break;
    case v1::Argument::kNone:
      p->mutable_none();
      break;
    case v1::Argument::kStringValue:
      p->set_string_value(std::string(v.string_value()));
      break;
    case v1::Argument::KIND_NOT_SET:
      break;
  }
}

// The node read, as protobuf's message.
v1::Node ToMessage(const NodeView& v) {
  v1::Node p;
  p.set_name(std::string(v.name()));
  const CallView& call = v.call();
  switch (v.kind_case()) {
    case v1::Node::kInput:
      p.mutable_input()->set_kind(static_cast<v1::InputKind>(v.input().kind()));
      p.mutable_input()->set_target(std::string(v.input().target()));
      break;
    case v1::Node::kConstant:
      p.mutable_constant()->set_name(std::string(v.constant().name()));
      break;
    case v1::Node::kCall:
      p.mutable_call()->set_op(std::string(call.op()));
      p.mutable_call()->set_schema(std::string(call.schema()));
      p.mutable_call()->set_at_load(call.at_load());
      for (const ArgumentView& a : call.args())
        ArgumentFrom(a, p.mutable_call()->add_args());
      break;
    case v1::Node::kDelegate:
      p.mutable_delegate()->set_module(std::string(v.delegate().module()));
      for (const ArgumentView& a : v.delegate().args())
        ArgumentFrom(a, p.mutable_delegate()->add_args());
      break;
    case v1::Node::kGetitem:
      p.mutable_getitem()->set_source(std::string(v.getitem().source()));
      p.mutable_getitem()->set_index(v.getitem().index());
      break;
    case v1::Node::kOutput:
      p.mutable_output();
      for (const ArgumentView& a : v.output().values())
        ArgumentFrom(a, p.mutable_output()->add_values());
      break;
    case v1::Node::KIND_NOT_SET:
      break;
  }
  switch (v.result_case()) {
    case v1::Node::kTensor:
      SpecFrom(v.tensor(), p.mutable_tensor());
      break;
    case v1::Node::kTuple:
      p.mutable_tuple();
      for (int e = 0; e < v.tuple().elements_size(); ++e)
        SpecFrom(v.tuple().elements(e), p.mutable_tuple()->add_elements());
      break;
    case v1::Node::kScalar:
      p.set_scalar(static_cast<v1::ScalarType>(v.scalar()));
      break;
    case v1::Node::RESULT_NOT_SET:
      break;
  }
  p.set_delegation_tag(std::string(v.delegation_tag()));
  if (v.has_source()) {
    p.mutable_source()->set_file(std::string(v.source().file()));
    p.mutable_source()->set_line(v.source().line());
    p.mutable_source()->set_name(std::string(v.source().name()));
  }
  return p;
}

}  // namespace

std::string DifferenceFromProtobuf(std::string_view bytes, bool* read) {
  NodeReader reader;
  const NodeView* view = reader.Read(bytes);
  if (read != nullptr) *read = view != nullptr;
  if (view == nullptr) return "";
  v1::Node parsed;
  if (!parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return "reads what protobuf refuses";
  std::string differences;
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);  // a NaN read is still a NaN
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&comparator);
  differencer.ReportDifferencesToString(&differences);
  if (differencer.Compare(parsed, ToMessage(*view))) return "";
  return differences.empty() ? "differs" : differences;
}

}  // namespace ferry::wire
