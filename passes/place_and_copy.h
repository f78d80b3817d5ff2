// place_and_copy: where every value lives, and exactly the copies needed.
//
// Requires: a lowered program (lower.h); delegates' target devices parse.
// Establishes, for every method (DESIGN.md §4, docs/passes.md):
//  - every reader sees its operand where it needs it: a device delegate on
//    its target device; a host operator, a host delegate (no target, or a
//    cpu target) and by default a method output on the host; a
//    metadata-only operator anywhere (never copied);
//  - every crossing is an explicit et_copy::_h2d_copy / _d2h_copy node whose
//    spec is its source's except device; device to device goes through the
//    host;
//  - a copy is made once per (storage, version, destination) and shared by
//    every reader at that version; an in-place host write (to a storage or
//    any view of it) bumps the version, so later device readers get a fresh
//    H2D placed after the write;
//  - an H2D sits right before its first reader, a D2H right after the value
//    it copies;
//  - program data stays host data: a device reader gets a copy, with a
//    per-call warning (or, with constant_staging=AT_LOAD, a copy marked
//    `at_load`); a non-dense constant reaching a device reader is refused;
//  - the skip options and error_on_per_call_copies per DESIGN.md §4;
//  - every value's spec carries its device.
// Copies from an earlier run are removed first, so running the pass on its
// own output changes nothing.
// Checked by CheckPlaced (checks.h).
#ifndef FERRY_PASSES_PLACE_AND_COPY_H_
#define FERRY_PASSES_PLACE_AND_COPY_H_

#include "passes/pass.h"
#include "passes/schema.h"

namespace ferry {

// Its counters (PassStats) count what the lowered program holds once it
// has run: the copies it made (per call, by direction, with the bytes of
// their specs, and the H2Ds made at load) and the delegates per device, one
// counter per device named kDelegatesOnCounter + Device::ToString(), in
// device order. The lowering's statistics (LowerStats, pipeline.h) are
// these.
absl::StatusOr<PassStats> PlaceAndCopy(Program& program,
                                       const LowerOptions& options,
                                       Diagnostics& diagnostics);
inline constexpr char kCopiesCounter[] = "copies";
inline constexpr char kH2DCopiesCounter[] = "h2d_copies";
inline constexpr char kD2HCopiesCounter[] = "d2h_copies";
inline constexpr char kLoadTimeCopiesCounter[] = "load_time_copies";
inline constexpr char kH2DBytesCounter[] = "h2d_bytes_per_call";
inline constexpr char kD2HBytesCounter[] = "d2h_bytes_per_call";
inline constexpr char kDelegatesOnCounter[] = "delegates_on:";

// The device a delegate node runs on: its module's target device, or the
// host when it has none (or it does not parse; validation reports that).
Device DelegateDevice(const Program& program, const Node& delegate);
Device DelegateDevice(const ProgramIndex& index, const Node& delegate);

// Whether `node` is an et_copy::_h2d_copy / _d2h_copy call. (Inline: asked
// of every node, more than once.)
inline bool IsH2DCopy(const Node& node) {
  return node.kind == NodeKind::kCall && node.target == kH2DCopyOp;
}
inline bool IsD2HCopy(const Node& node) {
  return node.kind == NodeKind::kCall && node.target == kD2HCopyOp;
}

}  // namespace ferry

#endif  // FERRY_PASSES_PLACE_AND_COPY_H_
