#include "passes/wire_writer.h"

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "passes/diagnostics.h"
#include "passes/proto_io.h"

namespace ferry {
namespace {

using google::protobuf::internal::WireFormatLite;
using Coded = google::protobuf::io::CodedOutputStream;

uint32_t Tag(int field, WireFormatLite::WireType type) {
  return WireFormatLite::MakeTag(field, type);
}

// Proto3 leaves a scalar that holds its default off the wire, unless it is a
// member of a oneof that is set: those take `present`.
constexpr bool kIfSet = false;
constexpr bool kAlways = true;

// The first walk: adds up the bytes the fields take, and appends the length
// of every length-delimited field it meets to `record`, in the order the
// fields are met, for the Writer to read back (a few per node: the node, its
// call, arguments and spec).
class Counter {
 public:
  explicit Counter(std::vector<uint32_t>& record) : record_(record) {}

  size_t size() const { return size_; }

  void Varint(int field, uint64_t v, bool present = kIfSet) {
    if (v != 0 || present)
      size_ +=
          Coded::VarintSize32(Tag(field, WireFormatLite::WIRETYPE_VARINT)) +
          Coded::VarintSize64(v);
  }
  void Double(int field, double v, bool present = kIfSet) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    if (bits != 0 || present)
      size_ +=
          Coded::VarintSize32(Tag(field, WireFormatLite::WIRETYPE_FIXED64)) + 8;
  }
  void Bytes(int field, std::string_view v, bool present = kIfSet) {
    if (!v.empty() || present) Delimited(field, v.size());
  }
  void Packed(int field, std::span<const int64_t> values) {
    if (values.empty()) return;
    Delimited(field, PackedSize(values));
  }
  template <typename Body>
  void Message(int field, const Body& body) {
    const size_t slot = record_.size();
    record_.push_back(0);
    const size_t before = size_;
    body(*this);
    const size_t length = size_ - before;
    size_ = before;
    record_[slot] = static_cast<uint32_t>(length);
    Delimited(field, length);
  }
  static size_t PackedSize(std::span<const int64_t> values) {
    size_t size = 0;
    for (int64_t v : values)
      size += Coded::VarintSize64(static_cast<uint64_t>(v));
    return size;
  }

 private:
  void Delimited(int field, size_t length) {
    size_ += Coded::VarintSize32(
                 Tag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) +
             Coded::VarintSize64(length) + length;
  }

  std::vector<uint32_t>& record_;
  size_t size_ = 0;
};

// The second walk: writes the fields at `at`, taking each length-delimited
// field's length from the sizes a Counter recorded in the same order.
class Writer {
 public:
  Writer(uint8_t* at, const uint32_t* lengths) : at_(at), lengths_(lengths) {}

  uint8_t* at() const { return at_; }

  void Varint(int field, uint64_t v, bool present = kIfSet) {
    if (v == 0 && !present) return;
    at_ = Coded::WriteTagToArray(Tag(field, WireFormatLite::WIRETYPE_VARINT),
                                 at_);
    at_ = Coded::WriteVarint64ToArray(v, at_);
  }
  void Double(int field, double v, bool present = kIfSet) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    if (bits == 0 && !present) return;
    at_ = Coded::WriteTagToArray(Tag(field, WireFormatLite::WIRETYPE_FIXED64),
                                 at_);
    at_ = Coded::WriteLittleEndian64ToArray(bits, at_);
  }
  void Bytes(int field, std::string_view v, bool present = kIfSet) {
    if (v.empty() && !present) return;
    Header(field, v.size());
    at_ = Coded::WriteRawToArray(v.data(), static_cast<int>(v.size()), at_);
  }
  void Packed(int field, std::span<const int64_t> values) {
    if (values.empty()) return;
    Header(field, Counter::PackedSize(values));
    for (int64_t v : values)
      at_ = Coded::WriteVarint64ToArray(static_cast<uint64_t>(v), at_);
  }
  template <typename Body>
  void Message(int field, const Body& body) {
    Header(field, *lengths_++);
    body(*this);
  }

 private:
  void Header(int field, size_t length) {
    at_ = Coded::WriteTagToArray(
        Tag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), at_);
    at_ = Coded::WriteVarint64ToArray(length, at_);
  }

  uint8_t* at_;
  const uint32_t* lengths_;
};

// The fields below are those of program.proto, by number, in the order the
// message's own serializer writes them (ascending field numbers), and with
// the presence ExportProgram gives them (proto_io.cc): keep the two in step.

std::string_view DeviceType(const Device& d) {
  return d.is_host() ? "cpu" : "cuda";
}

template <typename Out>
void WriteDevice(Out& out, int field, const Device& d) {
  out.Message(field, [&](auto& o) {
    o.Bytes(1, DeviceType(d));
    o.Varint(2, static_cast<uint64_t>(static_cast<int64_t>(d.index)));
  });
}

uint64_t Signed(int64_t v) { return static_cast<uint64_t>(v); }

template <typename Out>
void WriteSpec(Out& out, int field, const TensorSpec& s) {
  out.Message(field, [&](auto& o) {
    o.Varint(1, Signed(DTypeToProto(s.dtype)));
    o.Packed(2, std::span<const int64_t>(s.sizes.data(), s.sizes.size()));
    o.Packed(3, std::span<const int64_t>(s.strides.data(), s.strides.size()));
    o.Varint(4, Signed(s.storage_offset));
    if (s.device_present) WriteDevice(o, 5, s.device);
    if (s.memory != MemoryPlacement{}) {
      o.Message(6, [&](auto& m) {
        m.Varint(1, Signed(s.memory.arena));
        m.Varint(2, Signed(s.memory.offset));
        m.Varint(3, Signed(s.memory.size));
        m.Varint(4, s.memory.planned);
      });
    }
  });
}

// A reference to `v` in `m`: a node name, or an ElementRef (node, index) as
// field `element_field`; the name goes in `name_field` (a oneof member).
template <typename Out>
void WriteRef(Out& out, const Method& m, const ValueId& v, int name_field,
              int element_field) {
  const std::string& name = m.nodes[v.node].name;
  if (v.element >= 0) {
    out.Message(element_field, [&](auto& e) {
      e.Bytes(1, name);
      e.Varint(2, Signed(v.element));
    });
  } else {
    out.Bytes(name_field, name, kAlways);
  }
}

template <typename Out>
void WriteArgument(Out& out, int field, const Method& m, const Argument& a) {
  out.Message(field, [&](auto& o) {
    o.Bytes(1, a.name.str());
    switch (a.kind) {
      case ArgKind::kValue:
        WriteRef(o, m, a.value, 2, 3);
        break;
      case ArgKind::kValueList:
        o.Message(4, [&](auto& list) {
          for (const ValueId& v : a.values.vec())
            list.Message(1, [&](auto& r) { WriteRef(r, m, v, 1, 2); });
        });
        break;
      case ArgKind::kInt:
        o.Varint(5, Signed(a.int_value), kAlways);
        break;
      case ArgKind::kFloat:
        o.Double(6, a.float_value, kAlways);
        break;
      case ArgKind::kBool:
        o.Varint(7, a.bool_value, kAlways);
        break;
      case ArgKind::kInts:
        o.Message(8, [&](auto& ints) {
          const std::vector<int64_t>& values = a.ints.vec();
          ints.Packed(1, values);
        });
        break;
      case ArgKind::kDType:
        o.Varint(9, Signed(DTypeToProto(a.dtype)), kAlways);
        break;
      case ArgKind::kNone:
        o.Message(10, [](auto&) {});
        break;
      case ArgKind::kString:
        o.Bytes(11, a.string_value.str(), kAlways);
        break;
    }
  });
}

template <typename Out>
void WriteArguments(Out& out, int field, const Method& m, const Node& n) {
  for (const Argument& a : n.args) WriteArgument(out, field, m, a);
}

template <typename Out>
void WriteNode(Out& out, const Method& m, const Node& n) {
  out.Message(2, [&](auto& o) {
    o.Bytes(1, n.name);
    switch (n.kind) {
      case NodeKind::kInput:
        o.Message(2, [&](auto& i) {
          i.Varint(1, static_cast<uint64_t>(n.input_kind));
          i.Bytes(2, n.target);
        });
        break;
      case NodeKind::kConstant:
        o.Message(3, [&](auto& c) { c.Bytes(1, n.target); });
        break;
      case NodeKind::kCall:
        o.Message(4, [&](auto& c) {
          c.Bytes(1, n.target);
          WriteArguments(c, 2, m, n);
          c.Bytes(3, n.schema_text.str());
          c.Varint(4, n.at_load);
        });
        break;
      case NodeKind::kDelegate:
        o.Message(5, [&](auto& d) {
          d.Bytes(1, n.target);
          WriteArguments(d, 2, m, n);
        });
        break;
      case NodeKind::kGetItem:
        o.Message(6, [&](auto& g) {
          g.Bytes(1, m.nodes[n.getitem_source].name);
          g.Varint(2, Signed(n.getitem_index));
        });
        break;
      case NodeKind::kOutput:
        o.Message(7,
                  [&](auto& out_node) { WriteArguments(out_node, 1, m, n); });
        break;
    }
    switch (n.result) {
      case ResultKind::kTensor:
        WriteSpec(o, 10, n.tensor);
        break;
      case ResultKind::kTuple:
        o.Message(11, [&](auto& t) {
          for (const TensorSpec& s : n.tuple.vec()) WriteSpec(t, 1, s);
        });
        break;
      case ResultKind::kScalar:
        o.Varint(12, static_cast<uint64_t>(n.scalar), kAlways);
        break;
      case ResultKind::kNone:
        break;
    }
    o.Bytes(20, n.delegation_tag.str());
    if (n.source != nullptr) {
      o.Message(21, [&](auto& s) {
        s.Bytes(1, n.source->file);
        s.Varint(2, Signed(n.source->line));
        s.Bytes(3, n.source->name);
      });
    }
  });
}

template <typename Out>
void WriteMethod(Out& out, int field, const Method& m) {
  out.Message(field, [&](auto& o) {
    o.Bytes(1, m.name);
    for (const Node& n : m.nodes) WriteNode(o, m, n);
    for (const Arena& a : m.arenas) {
      o.Message(3, [&](auto& pa) {
        WriteDevice(pa, 1, a.device);
        pa.Varint(2, Signed(a.size));
        pa.Varint(3, Signed(a.lower_bound));
      });
    }
    if (m.lowered_with.has_value()) {
      const LoweredWith& with = *m.lowered_with;
      o.Message(4, [&](auto& w) {
        w.Varint(1, with.skip_h2d_for_method_inputs);
        w.Varint(2, with.skip_d2h_for_method_outputs);
        w.Varint(3, with.error_on_per_call_copies);
        w.Varint(4, with.enable_non_cpu_memory_planning);
        w.Varint(5, with.alloc_graph_input);
        w.Varint(6, with.alloc_graph_output);
        w.Varint(7, Signed(with.constant_staging));
      });
    }
  });
}

template <typename Out>
void WriteConstant(Out& out, const Constant& c) {
  out.Message(2, [&](auto& o) {
    o.Bytes(1, c.name);
    WriteSpec(o, 2, c.spec);
    if (c.data) o.Bytes(3, *c.data, kAlways);  // proto3 `optional`
    o.Varint(4, c.seed);
    if (c.data_digest) {
      o.Message(5, [&](auto& d) {
        d.Bytes(1, c.data_digest->hash);
        d.Varint(2, Signed(c.data_digest->size_bytes));
      });
    }
  });
}

template <typename Out>
void WriteModule(Out& out, const LoweredModule& m) {
  out.Message(3, [&](auto& o) {
    o.Bytes(1, m.id);
    o.Bytes(2, m.backend);
    for (const CompileSpec& cs : m.compile_specs) {
      o.Message(3, [&](auto& p) {
        p.Bytes(1, cs.key);
        p.Bytes(2, cs.value);
      });
    }
    WriteMethod(o, 4, m.graph);
    for (const TensorSpec& s : m.input_layouts) WriteSpec(o, 5, s);
    o.Varint(6, m.returns_tuple);
  });
}

// Frees what `v` holds now, not when its owner goes.
template <typename T>
void Release(T& v) {
  T().swap(v);
}

// Writes `program`'s fields; with `consume`, each method, constant and module
// is freed once it is written (the Writer's walk only).
template <typename Out>
void WriteProgram(Out& out, const Program& program, Program* consume) {
  for (size_t i = 0; i < program.methods.size(); ++i) {
    WriteMethod(out, 1, program.methods[i]);
    if (consume) consume->methods[i] = Method{};
  }
  for (size_t i = 0; i < program.constants.size(); ++i) {
    WriteConstant(out, program.constants[i]);
    if (consume) consume->constants[i] = Constant{};
  }
  for (size_t i = 0; i < program.modules.size(); ++i) {
    WriteModule(out, program.modules[i]);
    if (consume) consume->modules[i] = LoweredModule{};
  }
}

absl::Status Append(const Program& program, Program* consume, std::string& out,
                    int field, std::string_view then) {
  std::vector<uint32_t> lengths;  // of every length-delimited field
  Counter counter(lengths);
  WriteProgram(counter, program, nullptr);
  const size_t body = counter.size();
  const size_t header =
      field > 0 ? Coded::VarintSize32(
                      Tag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) +
                      Coded::VarintSize64(body)
                : 0;
  const size_t start = out.size();
  // Every byte is written below: resize's zero fill is the one extra touch.
  out.resize(start + header + body + then.size());
  uint8_t* at = reinterpret_cast<uint8_t*>(out.data()) + start;
  if (field > 0) {
    at = Coded::WriteTagToArray(
        Tag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), at);
    at = Coded::WriteVarint64ToArray(body, at);
  }
  Writer writer(at, lengths.data());
  WriteProgram(writer, program, consume);
  // Both walks visit the same fields: the writer ends exactly at the end.
  uint8_t* const end = reinterpret_cast<uint8_t*>(out.data()) + out.size();
  FERRY_RET_CHECK(writer.at() + then.size() == end);
  if (!then.empty()) std::memcpy(writer.at(), then.data(), then.size());
  if (consume) {
    Release(consume->methods);
    Release(consume->constants);
    Release(consume->modules);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AppendProgramWire(const Program& program, std::string& out,
                               int field, std::string_view then) {
  return Append(program, nullptr, out, field, then);
}

absl::Status AppendProgramWire(Program&& program, std::string& out, int field,
                               std::string_view then) {
  return Append(program, &program, out, field, then);
}

}  // namespace ferry
