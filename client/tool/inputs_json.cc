#include "client/tool/inputs_json.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "passes/ir.h"
#include "passes/proto_io.h"
#include "runtime/element.h"

namespace ferry::tool {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Value;

// Appends the numbers of `list` to `out`, checking it against
// sizes[dim...] when nested (a flat list is checked by its count later).
absl::Status Flatten(const ListValue& list, const std::vector<int64_t>& sizes,
                     size_t dim, bool nested, std::vector<const Value*>& out) {
  if (nested && dim < sizes.size() && list.values_size() != sizes[dim]) {
    return absl::InvalidArgumentError(
        absl::StrCat("dimension ", dim, " has ", list.values_size(),
                     " entries, the spec's sizes [", absl::StrJoin(sizes, ","),
                     "] say ", sizes[dim]));
  }
  for (const Value& value : list.values()) {
    if (value.has_list_value()) {
      if (!nested || dim + 1 >= sizes.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("nested deeper than the spec's sizes [",
                         absl::StrJoin(sizes, ","), "]"));
      }
      if (absl::Status s =
              Flatten(value.list_value(), sizes, dim + 1, nested, out);
          !s.ok()) {
        return s;
      }
    } else if (value.has_number_value() || value.has_bool_value()) {
      if (nested && dim + 1 != sizes.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("a number where dimension ", dim + 1, " of sizes [",
                         absl::StrJoin(sizes, ","), "] needs a list"));
      }
      if (static_cast<int64_t>(out.size()) >= kMaxInputElements) {
        return absl::InvalidArgumentError(
            absl::StrCat("more than ", kMaxInputElements, " numbers"));
      }
      out.push_back(&value);
    } else {
      return absl::InvalidArgumentError(
          "\"numbers\" holds something that is not a number or a list");
    }
  }
  return absl::OkStatus();
}

// The bytes of `numbers` as `value`'s dtype.
absl::Status NumbersToData(const Value& numbers, v1::InputValue& value) {
  const DType dtype = DTypeFromProto(value.spec().dtype());
  if (dtype == DType::kInvalid) {
    return absl::InvalidArgumentError("spec.dtype is missing or unknown");
  }
  std::vector<int64_t> sizes(value.spec().sizes().begin(),
                             value.spec().sizes().end());
  int64_t count = 1;
  for (int64_t size : sizes) {
    if (size < 0 || (size > 0 && count > kMaxInputElements / size)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.sizes [", absl::StrJoin(sizes, ","), "] are negative or over ",
          kMaxInputElements, " elements"));
    }
    count *= size;
  }
  std::vector<const Value*> flat;
  if (numbers.has_list_value()) {
    bool nested = false;
    for (const Value& v : numbers.list_value().values())
      nested = nested || v.has_list_value();
    // [] for a 0-element tensor, a flat list, or nesting that follows sizes.
    if (absl::Status s = Flatten(numbers.list_value(), sizes, 0,
                                 nested || sizes.size() == 1, flat);
        !s.ok()) {
      return s;
    }
  } else if (numbers.has_number_value() || numbers.has_bool_value()) {
    flat.push_back(&numbers);  // a scalar
  } else {
    return absl::InvalidArgumentError(
        "\"numbers\" must be a number or a list of numbers");
  }
  if (static_cast<int64_t>(flat.size()) != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(flat.size(), " numbers for sizes [",
                     absl::StrJoin(sizes, ","), "] (", count, " elements)"));
  }
  const bool is_float = dtype == DType::kF32 || dtype == DType::kF16 ||
                        dtype == DType::kBF16 || dtype == DType::kF64;
  const int64_t element = ElementSize(dtype);
  std::string data(static_cast<size_t>(count * element), '\0');
  for (int64_t i = 0; i < count; ++i) {
    const Value& v = *flat[static_cast<size_t>(i)];
    double number =
        v.has_bool_value() ? (v.bool_value() ? 1.0 : 0.0) : v.number_value();
    void* at = data.data() + i * element;
    if (is_float) {
      element::StoreDouble(dtype, at, number);
      continue;
    }
    if (!std::isfinite(number) || std::trunc(number) != number ||
        std::fabs(number) > 9007199254740992.0) {
      return absl::InvalidArgumentError(
          absl::StrCat("element ", i, " (", number,
                       ") is not a whole number, as the dtype needs"));
    }
    element::StoreInt64(dtype, at, static_cast<int64_t>(number));
  }
  value.set_data(std::move(data));
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseInputsJson(const std::string& path, const std::string& json,
                             v1::InputSet* inputs) {
  inputs->Clear();
  if (static_cast<int64_t>(json.size()) > kMaxInputsJsonBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", json.size(), " bytes, over the ", kMaxInputsJsonBytes,
        "-byte limit of a JSON InputSet (use the binary form, .binpb)"));
  }
  google::protobuf::Struct root;
  if (auto parsed = google::protobuf::util::JsonStringToMessage(json, &root);
      !parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a JSON object: ", std::string(parsed.message())));
  }
  auto found = root.fields().find("values");
  if (root.fields_size() != 1 || found == root.fields().end() ||
      !found->second.has_list_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a JSON InputSet is {\"values\": [...]} and nothing else"));
  }
  int index = 0;
  for (const Value& entry : found->second.list_value().values()) {
    const std::string where = absl::StrCat(path, ": values[", index++, "]");
    if (!entry.has_struct_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": not a JSON object"));
    }
    google::protobuf::Struct fields = entry.struct_value();
    std::optional<Value> numbers;
    if (auto it = fields.fields().find("numbers");
        it != fields.fields().end()) {
      numbers = it->second;
      fields.mutable_fields()->erase("numbers");
    }
    std::string rest;
    v1::InputValue value;
    if (auto printed =
            google::protobuf::util::MessageToJsonString(fields, &rest);
        !printed.ok()) {
      return absl::InternalError(std::string(printed.message()));
    }
    if (auto parsed = google::protobuf::util::JsonStringToMessage(rest, &value);
        !parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where,
          ": not a ferry.v1.InputValue: ", std::string(parsed.message())));
    }
    const std::string name = absl::StrCat(where, " (input '", value.method(),
                                          "/", value.input(), "')");
    if (numbers) {
      if (!value.data().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": \"data\" and \"numbers\" together"));
      }
      if (absl::Status converted = NumbersToData(*numbers, value);
          !converted.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": ", converted.message()));
      }
    }
    *inputs->add_values() = std::move(value);
  }
  return absl::OkStatus();
}

}  // namespace ferry::tool
