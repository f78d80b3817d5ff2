// Shared pieces of the family kernel tables (family.h).
#include "runtime/ops/family.h"

namespace ferry::host {

absl::Status RunGuarded(const KernelCall& call, HostKernelFn kernel,
                        bool elementwise) {
  if (!OutputsOverlapInputs(call, elementwise)) return kernel(call);
  std::vector<Scratch> temporaries;
  std::vector<TensorView> outputs;
  temporaries.reserve(call.outputs.size());
  for (const TensorView& out : call.outputs) {
    temporaries.push_back(MakeScratch(out.dtype, out.sizes));
    outputs.push_back(temporaries.back().view);
  }
  KernelCall redirected{call.op, call.args, outputs};
  if (absl::Status s = kernel(redirected); !s.ok()) return s;
  for (size_t i = 0; i < outputs.size(); ++i)
    ScatterContiguous(call.outputs[i], temporaries[i].bytes.data());
  return absl::OkStatus();
}

absl::Status NoData(const KernelCall&) { return absl::OkStatus(); }

std::vector<std::span<const FamilyKernel>> FamilyKernelTables() {
  return {ConvKernels(), NormKernels(), CreationKernels(), AttentionKernels()};
}

}  // namespace ferry::host
