// TensorView: a strided window onto tensor data, and the arguments kernels
// receive.
//
// A TensorView does not own memory. `data` is the address of element
// [0, ..., 0] (storage base + storage offset already applied); element
// [i0, ..., in] is at data + sum(ik * strides[k]) * ElementSize(dtype).
// Strides are in elements and may be 0 (broadcast). The memory may be host
// memory or device memory: which one is the caller's business (the executor
// checks it before a kernel runs).
#ifndef FERRY_RUNTIME_TENSOR_VIEW_H_
#define FERRY_RUNTIME_TENSOR_VIEW_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "passes/ir.h"

namespace ferry {

using DimVector = absl::InlinedVector<int64_t, 6>;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kInvalid;
  DimVector sizes;
  DimVector strides;

  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  int64_t element_size() const { return ElementSize(dtype); }
  std::byte* bytes() const { return static_cast<std::byte*>(data); }
  // Row-major dense (size-1 and empty dims may have any stride).
  bool IsContiguous() const;
  // Byte range [first, last) covering every element; {0, 0} when empty.
  // Requires non-negative strides.
  std::pair<int64_t, int64_t> ByteExtent() const;
  // "f32[4,3] strides [1,4]"
  std::string DebugString() const;
};

// Whether the bytes `a` and `b` reach intersect (false when either is empty).
bool Overlaps(const TensorView& a, const TensorView& b);
// Same address, dtype, sizes and strides.
bool SameView(const TensorView& a, const TensorView& b);

// A view of `spec`'s layout over a storage whose element 0 is at `storage`.
TensorView MakeView(void* storage, const TensorSpec& spec);
// A dense row-major view of `sizes` at `data`.
TensorView ContiguousView(void* data, DType dtype,
                          std::span<const int64_t> sizes);

// One argument of a kernel call, bound to a schema argument.
struct KernelArg {
  enum class Kind : uint8_t {
    kNone,  // omitted optional, or an explicit None
    kTensor,
    kTensorList,
    kInt,
    kFloat,
    kBool,
    kInts,
    kDType,
    kString,
  };
  Kind kind = Kind::kNone;
  TensorView tensor;
  std::vector<TensorView> tensors;
  int64_t int_value = 0;
  double float_value = 0;
  bool bool_value = false;
  std::vector<int64_t> ints;
  DType dtype = DType::kInvalid;
  std::string string_value;

  bool is_none() const { return kind == Kind::kNone; }
  bool is_tensor() const { return kind == Kind::kTensor; }
  // A number argument (int, float or bool) as a double / an int64.
  double AsDouble() const;
  int64_t AsInt() const;
  bool is_number() const {
    return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool;
  }
};

// What a kernel receives: one KernelArg per schema argument (in schema
// order, defaults already applied) and one output view per result. An
// in-place or out= operator's output view is the storage it writes; the
// result dtype is the output view's.
struct KernelCall {
  std::string_view op;  // qualified name, for messages
  std::span<const KernelArg> args;
  std::span<const TensorView> outputs;
};

// Whether some output of `call` overlaps one of its tensor inputs in a way a
// kernel cannot compute in place: any overlap, except (for elementwise
// kernels) an input that is exactly the output. Such calls compute into
// temporaries first.
bool OutputsOverlapInputs(const KernelCall& call, bool elementwise);

}  // namespace ferry

#endif  // FERRY_RUNTIME_TENSOR_VIEW_H_
