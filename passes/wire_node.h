// A node of a program read in place from its wire form, for import.
//
// Parsing a ferry.v1.Node makes an object for each of its submessages and a
// copy of each of its strings, all freed again once the node is imported:
// on a large request that is most of import's time (docs/performance.md,
// "Twenty-second round"). NodeReader reads the same fields into a NodeView,
// whose accessors have the names of the message's and whose strings point
// into the request's bytes. Once the reader has warmed up, reading a node
// allocates nothing.
//
// It reads only what has a single meaning: each field at most once (a
// repeated field as often as given), at most one member of each oneof,
// strings in UTF-8, no field the schema does not know. Anything else it
// refuses, and the caller parses that node with protobuf instead. So a node
// it reads imports exactly as its parsed message would (LowerWireTest, the
// pipeline and node fuzz targets), and a field added to the schema but not here
// makes nodes slower to read, never read wrongly (WireNodeTest checks that
// every field of the schema is read here).
#ifndef FERRY_PASSES_WIRE_NODE_H_
#define FERRY_PASSES_WIRE_NODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/v1/program.pb.h"

namespace ferry::wire {

// Consecutive entries of one of a NodeReader's pools: a repeated field.
template <typename T>
class Run {
 public:
  const T* begin() const {
    return count_ == 0 ? nullptr : pool_->data() + first_;
  }
  const T* end() const { return begin() + count_; }
  size_t size() const { return count_; }
  const T& operator[](size_t i) const { return begin()[i]; }

 private:
  friend class NodeReader;
  const std::vector<T>* pool_ = nullptr;
  uint32_t first_ = 0;
  uint32_t count_ = 0;
};

struct DeviceView {
  std::string_view type() const { return type_; }
  int32_t index() const { return index_; }
  std::string_view type_;
  int32_t index_ = 0;
};

struct MemoryView {
  int32_t arena() const { return arena_; }
  int64_t offset() const { return offset_; }
  int64_t size() const { return size_; }
  bool planned() const { return planned_; }
  int32_t arena_ = 0;
  int64_t offset_ = 0;
  int64_t size_ = 0;
  bool planned_ = false;
};

struct SpecView {
  int dtype() const { return dtype_; }
  const Run<int64_t>& sizes() const { return sizes_; }
  const Run<int64_t>& strides() const { return strides_; }
  int64_t storage_offset() const { return storage_offset_; }
  bool has_device() const { return has_device_; }
  const DeviceView& device() const { return device_; }
  bool has_memory() const { return has_memory_; }
  const MemoryView& memory() const { return memory_; }
  int dtype_ = 0;
  Run<int64_t> sizes_, strides_;
  int64_t storage_offset_ = 0;
  DeviceView device_;
  MemoryView memory_;
  bool has_device_ = false, has_memory_ = false;
};

struct TupleView {
  const SpecView& elements(int i) const {
    return elements_[static_cast<size_t>(i)];
  }
  int elements_size() const { return static_cast<int>(elements_.size()); }
  Run<SpecView> elements_;
};

struct SourceView {
  std::string_view file() const { return file_; }
  int32_t line() const { return line_; }
  std::string_view name() const { return name_; }
  std::string_view file_, name_;
  int32_t line_ = 0;
};

struct ElementView {
  std::string_view node() const { return node_; }
  int32_t index() const { return index_; }
  std::string_view node_;
  int32_t index_ = 0;
};

struct ValueRefView {
  bool has_element() const { return ref_ == v1::ValueRef::kElement; }
  const ElementView& element() const { return element_; }
  std::string_view node() const { return node_; }
  v1::ValueRef::RefCase ref_ = v1::ValueRef::REF_NOT_SET;
  std::string_view node_;
  ElementView element_;
};

struct ValueListView {
  const Run<ValueRefView>& values() const { return values_; }
  Run<ValueRefView> values_;
};

struct IntListView {
  const Run<int64_t>& values() const { return values_; }
  Run<int64_t> values_;
};

struct ArgumentView {
  ArgumentView() {}  // int_value_ set; a union of members with constructors
  std::string_view name() const { return name_; }
  v1::Argument::KindCase kind_case() const { return kind_; }
  std::string_view value() const { return text_; }
  const ElementView& element() const { return element_; }
  const ValueListView& values() const { return values_; }
  int64_t int_value() const { return int_value_; }
  double float_value() const { return float_value_; }
  bool bool_value() const { return int_value_ != 0; }
  const IntListView& ints() const { return ints_; }
  int dtype() const { return static_cast<int>(int_value_); }
  std::string_view string_value() const { return text_; }
  std::string_view name_;
  v1::Argument::KindCase kind_ = v1::Argument::KIND_NOT_SET;
  // The kind's value, as the message's oneof: only kind_'s member is set
  // and read (an argument in a pool is then half the size).
  union {
    int64_t int_value_ = 0;  // int_value, bool_value or dtype
    double float_value_;
    std::string_view text_;  // value or string_value
    ElementView element_;
    ValueListView values_;
    IntListView ints_;
  };
};

struct InputView {
  int kind() const { return kind_; }
  std::string_view target() const { return target_; }
  int kind_ = 0;
  std::string_view target_;
};

struct ConstantView {
  std::string_view name() const { return name_; }
  std::string_view name_;
};

// A call's, a delegate's or an output's fields: only the kind's own are
// set.
struct CallView {
  std::string_view op() const { return op_; }
  std::string_view module() const { return op_; }
  std::string_view schema() const { return schema_; }
  bool at_load() const { return at_load_; }
  const Run<ArgumentView>& args() const { return args_; }
  int args_size() const { return static_cast<int>(args_.size()); }
  const Run<ArgumentView>& values() const { return args_; }
  int values_size() const { return args_size(); }
  std::string_view op_;  // or module
  std::string_view schema_;
  Run<ArgumentView> args_;  // or values
  bool at_load_ = false;
};

struct GetItemView {
  std::string_view source() const { return source_; }
  int32_t index() const { return index_; }
  std::string_view source_;
  int32_t index_ = 0;
};

struct NodeView {
  std::string_view name() const { return name_; }
  v1::Node::KindCase kind_case() const { return kind_; }
  const InputView& input() const { return input_; }
  const ConstantView& constant() const { return constant_; }
  const CallView& call() const { return call_; }
  const CallView& delegate() const { return call_; }
  const GetItemView& getitem() const { return getitem_; }
  const CallView& output() const { return call_; }
  v1::Node::ResultCase result_case() const { return result_; }
  const SpecView& tensor() const { return tensor_; }
  const TupleView& tuple() const { return tuple_; }
  int scalar() const { return scalar_; }
  std::string_view delegation_tag() const { return delegation_tag_; }
  bool has_source() const { return has_source_; }
  const SourceView& source() const { return source_; }

  std::string_view name_;
  v1::Node::KindCase kind_ = v1::Node::KIND_NOT_SET;
  InputView input_;
  ConstantView constant_;
  CallView call_;  // call, delegate or output
  GetItemView getitem_;
  v1::Node::ResultCase result_ = v1::Node::RESULT_NOT_SET;
  SpecView tensor_;
  TupleView tuple_;
  int scalar_ = 0;
  std::string_view delegation_tag_;
  SourceView source_;
  bool has_source_ = false;
};

// Reads nodes one after another into the same NodeView and pools.
class NodeReader {
 public:
  // Reads `bytes`, a ferry.v1.Node in wire form (its value, without the tag
  // and length that hold it in its method). Null when they are not a node,
  // or when the node is one this reader leaves to protobuf (see the top of
  // this file). The view points into `bytes`, and is valid until the next
  // Read.
  const NodeView* Read(std::string_view bytes);

 private:
  class Fields;
  NodeView node_;
  std::vector<ArgumentView> args_;
  std::vector<ValueRefView> refs_;
  std::vector<SpecView> specs_;
  std::vector<int64_t> ints_;
};

// The reader checked against protobuf on `bytes` (a ferry.v1.Node in wire
// form), for tests and the `node` fuzz target: what differs between the
// node the reader reads, as a message, and protobuf's parse of the same
// bytes, or "reads what protobuf refuses". Empty when they agree or when
// the reader leaves the bytes to protobuf. `read`, when given, is set to
// whether the reader read them.
std::string DifferenceFromProtobuf(std::string_view bytes,
                                   bool* read = nullptr);

}  // namespace ferry::wire

#endif  // FERRY_PASSES_WIRE_NODE_H_
