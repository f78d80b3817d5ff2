// Checkers: what each pass header promises under "Establishes", as code.
//
// One checker per pass that establishes something. Each reads the program
// the pass left (and the options it ran with) and returns OK, or an internal
// error describing the first violation it finds ("place_and_copy: method
// 'forward': ..."). A violation is a bug in the pass, never a problem with
// the program: the pipeline reports those as diagnostics before the pass
// runs. The checkers re-derive the properties from the program itself; they
// share no code with the pass they check beyond the IR and the analyses
// (alias.h).
//
// The tests run CheckEstablished after every pass on every conformance and
// random program (Lower's `after_pass`, pipeline.h).
#ifndef FERRY_PASSES_CHECKS_H_
#define FERRY_PASSES_CHECKS_H_

#include <string_view>

#include "absl/status/status.h"
#include "passes/ir.h"
#include "passes/options.h"

namespace ferry {

// normalize_layout.h: every constant-table entry, and every node naming one,
// is contiguous or channels-last, unless a lowered module owns it or a
// delegate reads it (directly or through views).
absl::Status CheckLayoutNormalized(const Program& program,
                                   const LowerOptions& options);

// partition.h: tags only on lowerable calls, getitems of a tagged call (same
// tag) and program data whose every reader carries that tag; a tagged
// in-place call writes only storage its group defines; every group convex.
absl::Status CheckPartitioned(const Program& program,
                              const LowerOptions& options);

// lower.h: no method node carries a tag; nodes are in topological order;
// every delegate names a module whose user inputs match its arguments and
// whose outputs match its tuple result; getitems of a delegate are in range.
absl::Status CheckLowered(const Program& program, const LowerOptions& options);

// place_and_copy.h: a device delegate reads only values on its device, a
// host reader only host values; every copy crosses from the right side to
// the right side, keeps its source's layout, is read, and only by readers
// on its destination side; an H2D sits right before its first reader and a
// D2H right after its source; no two copies stand for the same (storage,
// version, destination); program data stays on the host; delegate results
// carry their device. Without device memory planning: no copies, delegate
// results labelled.
absl::Status CheckPlaced(const Program& program, const LowerOptions& options);

// plan_memory.h: arenas one per device, sorted, aligned; every storage root
// that needs memory is planned, and nothing else; every placement lies
// inside its arena, on the arena's device; aliases carry their root's
// placement; two planned storages whose lifetimes overlap do not share a
// byte.
absl::Status CheckPlanned(const Program& program, const LowerOptions& options);

// The checker of the pipeline pass named `pass` ("partition", ...); OK for
// a pass that establishes nothing checkable.
absl::Status CheckEstablished(std::string_view pass, const Program& program,
                              const LowerOptions& options);

}  // namespace ferry

#endif  // FERRY_PASSES_CHECKS_H_
