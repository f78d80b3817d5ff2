#include "passes/wire_writer.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

// The one walk: writes each field at the end of `out`, which grows as
// needed. A length-delimited field's length comes before its contents but is
// known only once they are written, and protobuf writes it as the shortest
// varint (the bytes must be the serializer's). So the writer leaves room for
// the length it expects (one byte unless the caller hints at more) and, when
// the contents turn out to need a wider or narrower length, moves them to
// fit: a few bytes of a small message, now and then.
class Writer {
 public:
  // Writes after what `out` holds, with room for twice the `expected`
  // bytes more reserved up front (moving what is written to grow it costs a
  // copy; room reserved and not written is address space only).
  Writer(std::string& out, size_t expected) : out_(out) {
    const size_t at = out.size();
    out_.reserve(at + 2 * expected);
    Sync(at);
  }

  // The end of what is written so far (an offset into `out`).
  size_t at() const { return at_ - begin_; }

  void Varint(int field, uint64_t v, bool present = kIfSet) {
    if (v == 0 && !present) return;
    Room(kMaxTag + kMaxVarint);
    at_ = Coded::WriteTagToArray(Tag(field, WireFormatLite::WIRETYPE_VARINT),
                                 at_);
    at_ = Coded::WriteVarint64ToArray(v, at_);
  }
  void Double(int field, double v, bool present = kIfSet) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    if (bits == 0 && !present) return;
    Room(kMaxTag + sizeof bits);
    at_ = Coded::WriteTagToArray(Tag(field, WireFormatLite::WIRETYPE_FIXED64),
                                 at_);
    at_ = Coded::WriteLittleEndian64ToArray(bits, at_);
  }
  void Bytes(int field, std::string_view v, bool present = kIfSet) {
    if (v.empty() && !present) return;
    Header(field, v.size(), v.size());
    if (!v.empty()) std::memcpy(at_, v.data(), v.size());
    at_ += v.size();
  }
  void Packed(int field, std::span<const int64_t> values) {
    if (values.empty()) return;
    size_t size = 0;
    for (int64_t v : values)
      size += Coded::VarintSize64(static_cast<uint64_t>(v));
    Header(field, size, size);
    for (int64_t v : values)
      at_ = Coded::WriteVarint64ToArray(static_cast<uint64_t>(v), at_);
  }
  // A nested message: its tag, its length and `body`'s fields. `expected`
  // is about how long it will be (0: short), for the room left for the
  // length.
  template <typename Body>
  void Message(int field, const Body& body, size_t expected = 0) {
    Room(kMaxTag + kMaxVarint);
    at_ = Coded::WriteTagToArray(
        Tag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), at_);
    const size_t length_at = at();
    const size_t room = Coded::VarintSize64(expected);
    at_ += room;
    body(*this);
    const size_t length = at() - length_at - room;
    const size_t width = Coded::VarintSize64(length);
    if (width != room) {
      Room(kMaxVarint);
      std::memmove(begin_ + length_at + width, begin_ + length_at + room,
                   length);
      at_ = begin_ + length_at + width + length;
    }
    Coded::WriteVarint64ToArray(length, begin_ + length_at);
  }

 private:
  static constexpr size_t kMaxTag = 5;       // a varint32
  static constexpr size_t kMaxVarint = 10;   // a varint64
  static constexpr size_t kStep = 64 << 10;  // bytes the output grows by

  // At least `bytes` of room at at_. (Asked before every field: inline,
  // with the rare growth out of line.)
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Room(size_t bytes) {
    if (ABSL_PREDICT_FALSE(static_cast<size_t>(end_ - at_) < bytes))
      Grow(bytes);
  }
  ABSL_ATTRIBUTE_NOINLINE void Grow(size_t bytes) {
    const size_t at = this->at();
    // A step at a time, as the zero fill of `resize` touches each byte.
    out_.resize(std::max(at + bytes, out_.size() + kStep));
    Sync(at);
  }
  void Sync(size_t at) {
    begin_ = reinterpret_cast<uint8_t*>(out_.data());
    at_ = begin_ + at;
    end_ = begin_ + out_.size();
  }
  // A length-delimited field's tag and `length`, with room for `contents`
  // bytes after them.
  void Header(int field, size_t length, size_t contents) {
    Room(kMaxTag + kMaxVarint + contents);
    at_ = Coded::WriteTagToArray(
        Tag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), at_);
    at_ = Coded::WriteVarint64ToArray(length, at_);
  }

  std::string& out_;
  uint8_t* begin_ = nullptr;  // out_'s bytes,
  uint8_t* at_ = nullptr;     // where the next field goes,
  uint8_t* end_ = nullptr;    // and their end
};

// About how many bytes each part of a program takes on the wire, for the
// room its length gets (a wrong guess costs a move, not a wrong length).
size_t ExpectedBytes(const Method& m) { return 64 * m.nodes.size(); }
size_t ExpectedBytes(const Constant& c) {
  return 64 + (c.data ? c.data->size() : 0);
}
size_t ExpectedBytes(const LoweredModule& m) {
  return 64 + ExpectedBytes(m.graph);
}
size_t ExpectedBytes(const Program& program) {
  size_t bytes = 0;
  for (const Method& m : program.methods) bytes += ExpectedBytes(m);
  for (const Constant& c : program.constants) bytes += ExpectedBytes(c);
  for (const LoweredModule& m : program.modules) bytes += ExpectedBytes(m);
  return bytes;
}

// The fields below are those of program.proto, by number, in the order the
// message's own serializer writes them (ascending field numbers), and with
// the presence ExportProgram gives them (proto_io.cc): keep the two in step.

std::string_view DeviceType(const Device& d) {
  return d.is_host() ? "cpu" : "cuda";
}

void WriteDevice(Writer& out, int field, const Device& d) {
  out.Message(field, [&](Writer& o) {
    o.Bytes(1, DeviceType(d));
    o.Varint(2, static_cast<uint64_t>(static_cast<int64_t>(d.index)));
  });
}

uint64_t Signed(int64_t v) { return static_cast<uint64_t>(v); }

void WriteSpec(Writer& out, int field, const TensorSpec& s) {
  out.Message(field, [&](Writer& o) {
    o.Varint(1, Signed(DTypeToProto(s.dtype)));
    o.Packed(2, std::span<const int64_t>(s.sizes.data(), s.sizes.size()));
    o.Packed(3, std::span<const int64_t>(s.strides.data(), s.strides.size()));
    o.Varint(4, Signed(s.storage_offset));
    if (s.device_present) WriteDevice(o, 5, s.device);
    if (s.memory != MemoryPlacement{}) {
      o.Message(6, [&](Writer& m) {
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
void WriteRef(Writer& out, const Method& m, const ValueId& v, int name_field,
              int element_field) {
  const std::string& name = m.nodes[v.node].name;
  if (v.element >= 0) {
    out.Message(element_field, [&](Writer& e) {
      e.Bytes(1, name);
      e.Varint(2, Signed(v.element));
    });
  } else {
    out.Bytes(name_field, name, kAlways);
  }
}

void WriteArgument(Writer& out, int field, const Method& m, const Argument& a) {
  out.Message(field, [&](Writer& o) {
    o.Bytes(1, a.name.str());
    switch (a.kind) {
      case ArgKind::kValue:
        WriteRef(o, m, a.value, 2, 3);
        break;
      case ArgKind::kValueList:
        o.Message(4, [&](Writer& list) {
          for (const ValueId& v : a.values.vec())
            list.Message(1, [&](Writer& r) { WriteRef(r, m, v, 1, 2); });
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
        o.Message(8, [&](Writer& ints) {
          const std::vector<int64_t>& values = a.ints.vec();
          ints.Packed(1, values);
        });
        break;
      case ArgKind::kDType:
        o.Varint(9, Signed(DTypeToProto(a.dtype)), kAlways);
        break;
      case ArgKind::kNone:
        o.Message(10, [](Writer&) {});
        break;
      case ArgKind::kString:
        o.Bytes(11, a.string_value.str(), kAlways);
        break;
    }
  });
}

void WriteArguments(Writer& out, int field, const Method& m, const Node& n) {
  for (const Argument& a : n.args) WriteArgument(out, field, m, a);
}

void WriteNode(Writer& out, const Method& m, const Node& n) {
  out.Message(2, [&](Writer& o) {
    o.Bytes(1, n.name);
    switch (n.kind) {
      case NodeKind::kInput:
        o.Message(2, [&](Writer& i) {
          i.Varint(1, static_cast<uint64_t>(n.input_kind));
          i.Bytes(2, n.target);
        });
        break;
      case NodeKind::kConstant:
        o.Message(3, [&](Writer& c) { c.Bytes(1, n.target); });
        break;
      case NodeKind::kCall:
        o.Message(4, [&](Writer& c) {
          c.Bytes(1, n.target);
          WriteArguments(c, 2, m, n);
          c.Bytes(3, n.schema_text.str());
          c.Varint(4, n.at_load);
        });
        break;
      case NodeKind::kDelegate:
        o.Message(5, [&](Writer& d) {
          d.Bytes(1, n.target);
          WriteArguments(d, 2, m, n);
        });
        break;
      case NodeKind::kGetItem:
        o.Message(6, [&](Writer& g) {
          g.Bytes(1, m.nodes[n.getitem_source].name);
          g.Varint(2, Signed(n.getitem_index));
        });
        break;
      case NodeKind::kOutput:
        o.Message(7,
                  [&](Writer& out_node) { WriteArguments(out_node, 1, m, n); });
        break;
    }
    switch (n.result) {
      case ResultKind::kTensor:
        WriteSpec(o, 10, n.tensor);
        break;
      case ResultKind::kTuple:
        o.Message(11, [&](Writer& t) {
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
      o.Message(21, [&](Writer& s) {
        s.Bytes(1, n.source->file);
        s.Varint(2, Signed(n.source->line));
        s.Bytes(3, n.source->name);
      });
    }
  });
}

void WriteMethod(Writer& out, int field, const Method& m) {
  out.Message(
      field,
      [&](Writer& o) {
        o.Bytes(1, m.name);
        for (const Node& n : m.nodes) WriteNode(o, m, n);
        for (const Arena& a : m.arenas) {
          o.Message(3, [&](Writer& pa) {
            WriteDevice(pa, 1, a.device);
            pa.Varint(2, Signed(a.size));
            pa.Varint(3, Signed(a.lower_bound));
          });
        }
        if (m.lowered_with.has_value()) {
          const LoweredWith& with = *m.lowered_with;
          o.Message(4, [&](Writer& w) {
            w.Varint(1, with.skip_h2d_for_method_inputs);
            w.Varint(2, with.skip_d2h_for_method_outputs);
            w.Varint(3, with.error_on_per_call_copies);
            w.Varint(4, with.enable_non_cpu_memory_planning);
            w.Varint(5, with.alloc_graph_input);
            w.Varint(6, with.alloc_graph_output);
            w.Varint(7, Signed(with.constant_staging));
          });
        }
      },
      ExpectedBytes(m));
}

void WriteConstant(Writer& out, const Constant& c) {
  out.Message(
      2,
      [&](Writer& o) {
        o.Bytes(1, c.name);
        WriteSpec(o, 2, c.spec);
        if (c.data) o.Bytes(3, *c.data, kAlways);  // proto3 `optional`
        o.Varint(4, c.seed);
        if (c.data_digest) {
          o.Message(5, [&](Writer& d) {
            d.Bytes(1, c.data_digest->hash);
            d.Varint(2, Signed(c.data_digest->size_bytes));
          });
        }
      },
      ExpectedBytes(c));
}

void WriteModule(Writer& out, const LoweredModule& m) {
  out.Message(
      3,
      [&](Writer& o) {
        o.Bytes(1, m.id);
        o.Bytes(2, m.backend);
        for (const CompileSpec& cs : m.compile_specs) {
          o.Message(3, [&](Writer& p) {
            p.Bytes(1, cs.key);
            p.Bytes(2, cs.value);
          });
        }
        WriteMethod(o, 4, m.graph);
        for (const TensorSpec& s : m.input_layouts) WriteSpec(o, 5, s);
        o.Varint(6, m.returns_tuple);
      },
      ExpectedBytes(m));
}

// Frees what `v` holds now, not when its owner goes.
template <typename T>
void Release(T& v) {
  T().swap(v);
}

// Writes `program`'s fields; with `consume`, each method, constant and module
// is freed once it is written (the Writer's walk only).
void WriteProgram(Writer& out, const Program& program, Program* consume) {
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
  const size_t start = out.size();
  const size_t expected = ExpectedBytes(program);
  Writer writer(out, expected + then.size());
  if (field > 0) {
    writer.Message(
        field, [&](Writer& w) { WriteProgram(w, program, consume); }, expected);
  } else {
    WriteProgram(writer, program, consume);
  }
  out.resize(writer.at());
  out.append(then);
  if (consume) {
    Release(consume->methods);
    Release(consume->constants);
    Release(consume->modules);
  }
  // Protobuf reads no message over 2 GiB (nor writes one).
  if (writer.at() - start > static_cast<size_t>(INT32_MAX)) {
    out.resize(start);
    return absl::ResourceExhaustedError(absl::StrCat(
        "the lowered program is ", writer.at() - start,
        " bytes on the wire; a protobuf message is at most 2 GiB"));
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
