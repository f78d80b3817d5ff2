// The structure-aware request mutator (proto_mutator.h).
//
// One edit: collect every field slot of the message tree (each singular
// field, set or not; each element of a repeated field; each repeated field as
// a whole), pick one at random and change it according to its type:
//  - integers: an "interesting" value (0, ±1, powers of two around the int32
//    and int64 limits, ...) or a small step from the current one;
//  - floats, bools, enums (any number: proto3 enums are open);
//  - strings: one already in the message (a node's or a module's name, an
//    operator) or from the dictionary, or the current one with a character
//    changed; bytes (constant data): truncated, extended or one byte flipped;
//  - a repeated field: an element added (default, or a copy of a message of
//    the same type from anywhere in the tree), removed, duplicated, or two
//    swapped;
//  - a message: cleared, created, or replaced by a copy of another message of
//    its type (this also switches a oneof, e.g. a node's `call` to a
//    `delegate`).
#include "tests/fuzz/proto_mutator.h"

#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ferry/v1/program.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "passes/proto_io.h"
#include "passes/schema.h"

namespace ferry::fuzz {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

struct Slot {
  Message* message;
  const FieldDescriptor* field;
  int index;  // element of a repeated field; -1: the singular field, or the
              // repeated field as a whole
};

struct Tree {
  std::vector<Slot> slots;
  std::vector<std::string> strings;
  std::map<const Descriptor*, std::vector<const Message*>> by_type;
};

constexpr int kMaxDepth = 12;

void Collect(Message* message, int depth, Tree& tree) {
  const Descriptor* descriptor = message->GetDescriptor();
  const Reflection* reflection = message->GetReflection();
  tree.by_type[descriptor].push_back(message);
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    const bool is_message =
        field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    const bool is_text = field->type() == FieldDescriptor::TYPE_STRING;
    if (field->is_repeated()) {
      tree.slots.push_back({message, field, -1});
      const int n = reflection->FieldSize(*message, field);
      for (int k = 0; k < n; ++k) {
        if (is_message) {
          if (depth < kMaxDepth)
            Collect(reflection->MutableRepeatedMessage(message, field, k),
                    depth + 1, tree);
          continue;
        }
        tree.slots.push_back({message, field, k});
        if (is_text)
          tree.strings.push_back(
              reflection->GetRepeatedString(*message, field, k));
      }
      continue;
    }
    tree.slots.push_back({message, field, -1});
    if (is_message && reflection->HasField(*message, field) &&
        depth < kMaxDepth)
      Collect(reflection->MutableMessage(message, field), depth + 1, tree);
    if (is_text && reflection->HasField(*message, field))
      tree.strings.push_back(reflection->GetString(*message, field));
  }
}

const std::vector<std::string>& Dictionary() {
  static const std::vector<std::string>* const words = [] {
    auto* out = new std::vector<std::string>{
        "",
        "output",
        "forward",
        "cuda:0",
        "cuda:1",
        "cuda:-1",
        "cpu",
        "sim",
        "tpu:0",
        "cuda:",
        "target_device",
        "FerryCudaBackend",
        "getitem",
        "delegate",
        "m",
        "x",
        "a",
        "self",
        std::string(kH2DCopyOp),
        std::string(kD2HCopyOp),
        "aten::foo(Tensor(a) self) -> Tensor(b)",
        "aten::bar(Tensor(a!) self, Tensor(a!) other) -> Tensor(a!)"};
    for (const std::string& op : RegisteredOps()) out->push_back(op);
    return out;
  }();
  return *words;
}

template <typename T>
T Pick(const std::vector<T>& values, std::mt19937_64& rng) {
  return values[rng() % values.size()];
}

int64_t InterestingInt(int64_t current, std::mt19937_64& rng) {
  static const std::vector<int64_t> kValues = {0,
                                               1,
                                               -1,
                                               2,
                                               3,
                                               4,
                                               7,
                                               8,
                                               16,
                                               17,
                                               64,
                                               255,
                                               256,
                                               1000,
                                               1024,
                                               4096,
                                               65535,
                                               65536,
                                               int64_t{1} << 20,
                                               int64_t{1} << 24,
                                               100000,
                                               2147483647,
                                               -2147483648LL,
                                               int64_t{1} << 31,
                                               int64_t{1} << 32,
                                               int64_t{4294967296} + 4,
                                               int64_t{1} << 40,
                                               int64_t{1} << 62,
                                               INT64_MAX,
                                               INT64_MIN,
                                               INT64_MIN + 1};
  const uint64_t bits = static_cast<uint64_t>(current);  // wraps, no UB
  switch (rng() % 4) {
    case 0:
      return static_cast<int64_t>(bits + 1);
    case 1:
      return static_cast<int64_t>(bits - 1);
    case 2:
      return static_cast<int64_t>(bits * 2);
    default:
      return Pick(kValues, rng);
  }
}

double InterestingDouble(std::mt19937_64& rng) {
  static const std::vector<double> kValues = {
      0.0,
      -0.0,
      1.0,
      -1.0,
      0.5,
      1e-30,
      1e30,
      65504.0,
      1e308,
      std::numeric_limits<double>::infinity(),
      -std::numeric_limits<double>::infinity(),
      std::numeric_limits<double>::quiet_NaN()};
  return Pick(kValues, rng);
}

std::string NewString(const std::string& current, const Tree& tree,
                      std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0:
    case 1:
      if (!tree.strings.empty()) return Pick(tree.strings, rng);
      [[fallthrough]];
    case 2:
      return Pick(Dictionary(), rng);
    default: {
      std::string out = current;
      if (out.empty() || rng() % 2) {
        out.insert(out.begin() + (out.empty() ? 0 : rng() % out.size()),
                   static_cast<char>(" _.:(),!-*>?[]0a"[rng() % 16]));
      } else {
        out.erase(rng() % out.size(), 1);
      }
      return out;
    }
  }
}

std::string NewBytes(std::string bytes, std::mt19937_64& rng) {
  switch (rng() % 3) {
    case 0:
      bytes.resize(bytes.empty() ? 0 : rng() % bytes.size());
      return bytes;
    case 1:
      bytes.append(1 + rng() % 16, static_cast<char>(rng()));
      return bytes;
    default:
      if (!bytes.empty()) bytes[rng() % bytes.size()] ^= 1 << (rng() % 8);
      return bytes;
  }
}

// A copy of some message of `descriptor`'s type in the tree (nullptr: none).
std::unique_ptr<Message> CopyOfSameType(const Descriptor* descriptor,
                                        const Tree& tree,
                                        std::mt19937_64& rng) {
  auto it = tree.by_type.find(descriptor);
  if (it == tree.by_type.end() || it->second.empty()) return nullptr;
  const Message* source = Pick(it->second, rng);
  std::unique_ptr<Message> copy(source->New());
  copy->CopyFrom(*source);
  return copy;
}

// Moves the last element of a repeated field to position `to`.
void MoveLastTo(Message* message, const FieldDescriptor* field, int to) {
  const Reflection* reflection = message->GetReflection();
  for (int k = reflection->FieldSize(*message, field) - 1; k > to; --k)
    reflection->SwapElements(message, field, k, k - 1);
}

// Sets the scalar at `slot` (index -1: singular; otherwise that element; or,
// with `add`, a new element) to a new value.
void SetScalar(const Slot& slot, bool add, const Tree& tree,
               std::mt19937_64& rng) {
  Message* m = slot.message;
  const FieldDescriptor* f = slot.field;
  const Reflection* r = m->GetReflection();
  const int i = slot.index;
  const bool repeated = f->is_repeated();
#define FERRY_SET(Type, value)              \
  do {                                      \
    if (!repeated)                          \
      r->Set##Type(m, f, value);            \
    else if (add)                           \
      r->Add##Type(m, f, value);            \
    else                                    \
      r->SetRepeated##Type(m, f, i, value); \
  } while (0)
#define FERRY_GET(Type)                  \
  (add ? decltype(r->Get##Type(*m, f)){} \
       : (repeated ? r->GetRepeated##Type(*m, f, i) : r->Get##Type(*m, f)))
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      FERRY_SET(Int32,
                static_cast<int32_t>(InterestingInt(FERRY_GET(Int32), rng)));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      FERRY_SET(Int64, InterestingInt(FERRY_GET(Int64), rng));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      FERRY_SET(UInt32,
                static_cast<uint32_t>(InterestingInt(FERRY_GET(UInt32), rng)));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      FERRY_SET(UInt64, static_cast<uint64_t>(InterestingInt(
                            static_cast<int64_t>(FERRY_GET(UInt64)), rng)));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      FERRY_SET(Double, InterestingDouble(rng));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      FERRY_SET(Float, static_cast<float>(InterestingDouble(rng)));
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      FERRY_SET(Bool, !FERRY_GET(Bool));
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* type = f->enum_type();
      int value = rng() % 8 == 0
                      ? static_cast<int>(InterestingInt(0, rng))
                      : type->value(rng() % type->value_count())->number();
      FERRY_SET(EnumValue, value);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string current = FERRY_GET(String);
      FERRY_SET(String, f->type() == FieldDescriptor::TYPE_BYTES
                            ? NewBytes(current, rng)
                            : NewString(current, tree, rng));
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
#undef FERRY_SET
#undef FERRY_GET
}

void EditRepeated(const Slot& slot, const Tree& tree, std::mt19937_64& rng) {
  Message* m = slot.message;
  const FieldDescriptor* f = slot.field;
  const Reflection* r = m->GetReflection();
  const int n = r->FieldSize(*m, f);
  const bool is_message = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
  switch (n == 0 ? 0 : rng() % 4) {
    case 0: {  // add
      const int at = n == 0 ? 0 : rng() % (n + 1);
      if (is_message) {
        std::unique_ptr<Message> copy =
            rng() % 3 ? CopyOfSameType(f->message_type(), tree, rng) : nullptr;
        Message* added = r->AddMessage(m, f);
        if (copy) added->CopyFrom(*copy);
      } else {
        SetScalar(slot, /*add=*/true, tree, rng);
      }
      MoveLastTo(m, f, at);
      break;
    }
    case 1: {  // remove
      const int at = rng() % n;
      for (int k = at; k < n - 1; ++k) r->SwapElements(m, f, k, k + 1);
      r->RemoveLast(m, f);
      break;
    }
    case 2: {  // duplicate (a message), or insert after (a scalar)
      const int at = rng() % n;
      if (is_message) {
        std::unique_ptr<Message> copy(r->GetRepeatedMessage(*m, f, at).New());
        copy->CopyFrom(r->GetRepeatedMessage(*m, f, at));
        r->AddMessage(m, f)->CopyFrom(*copy);
      } else {
        SetScalar(slot, /*add=*/true, tree, rng);  // a neighbour, new value
      }
      MoveLastTo(m, f, at + 1);
      break;
    }
    default:  // swap
      r->SwapElements(m, f, rng() % n, rng() % n);
      break;
  }
}

void EditMessage(const Slot& slot, const Tree& tree, std::mt19937_64& rng) {
  Message* m = slot.message;
  const FieldDescriptor* f = slot.field;
  const Reflection* r = m->GetReflection();
  if (r->HasField(*m, f) && rng() % 3 == 0) {
    r->ClearField(m, f);
    return;
  }
  std::unique_ptr<Message> copy =
      rng() % 2 ? CopyOfSameType(f->message_type(), tree, rng) : nullptr;
  Message* target = r->MutableMessage(m, f);  // switches a oneof
  if (copy) target->CopyFrom(*copy);
}

}  // namespace

void MutateMessage(Message* message, std::mt19937_64& rng) {
  Tree tree;
  Collect(message, 0, tree);
  if (tree.slots.empty()) return;
  const Slot& slot = tree.slots[rng() % tree.slots.size()];
  if (slot.field->is_repeated() && slot.index < 0) {
    EditRepeated(slot, tree, rng);
  } else if (slot.field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    EditMessage(slot, tree, rng);
  } else {
    SetScalar(slot, /*add=*/false, tree, rng);
  }
}

size_t MutateRequestBytes(uint8_t* data, size_t size, size_t max_size,
                          unsigned int seed) {
  v1::LowerRequest request;
  bool bare = false;
  if (!ParseRequest(std::string_view(reinterpret_cast<const char*>(data), size),
                    FileFormat::kBinary, "mutant", &request, &bare)
           .ok())
    return 0;
  std::mt19937_64 rng(seed);
  const int edits = 1 + rng() % 4;
  for (int i = 0; i < edits; ++i) MutateMessage(&request, rng);
  std::string out;
  if (!request.SerializeToString(&out) || out.empty() || out.size() > max_size)
    return 0;
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

}  // namespace ferry::fuzz
