// The shape every pass has: one entry point taking the program, the resolved
// options and the diagnostics, returning its statistics. A pass reports
// problems with the program as diagnostics; a non-OK status means the pass
// itself failed (an internal invariant, via FERRY_RET_CHECK).
#ifndef FERRY_PASSES_PASS_H_
#define FERRY_PASSES_PASS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/diagnostics.h"
#include "passes/ir.h"
#include "passes/options.h"

namespace ferry {

struct PassStats {
  // Named counters in the order the pass added them, e.g. {"copies", 3}.
  std::vector<std::pair<std::string, int64_t>> counters;
  void Add(std::string name, int64_t value) {
    counters.emplace_back(std::move(name), value);
  }
};

using PassFn = absl::StatusOr<PassStats> (*)(Program&, const LowerOptions&,
                                             Diagnostics&);

}  // namespace ferry

#endif  // FERRY_PASSES_PASS_H_
