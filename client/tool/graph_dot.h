// Pictures of a lowered program's placement in Graphviz's DOT language, and
// the short text summary `ferry show` prints (docs/graph.md).
//
// One analysis (PlacementOf) reads the lowered program; the DOT views and
// the summary are drawn from it:
//   - every value is coloured by the device it lives on, with a legend;
//   - delegate nodes sit in one cluster per device (a nested cluster per
//     delegate holds its getitems);
//   - copies (et_copy::_h2d_copy / _d2h_copy) are highlighted edges labelled
//     with their bytes per call;
//   - a host write that forced a fresh H2D copy (the storage was valid on
//     that device before the write, the coherence walk of place_and_copy
//     invalidated it) is marked on the writer and on the copy.
// The summary view (`summary`, or a method over `summary_above` nodes) draws
// one box per delegate and per run of host nodes, with the copies between
// them aggregated into one edge per direction and pair of boxes.
#ifndef FERRY_CLIENT_TOOL_GRAPH_DOT_H_
#define FERRY_CLIENT_TOOL_GRAPH_DOT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "passes/ir.h"

namespace ferry::tool {

// What a copy node is, as the picture shows it.
struct CopyInfo {
  bool h2d = false;      // else D2H
  bool at_load = false;  // made once at load time, not per call
  int64_t bytes = 0;     // storage bytes, as the lowering stats count them
  int32_t source = -1;   // node producing the copied value
  // The host write that forced this (H2D) copy, or -1.
  int32_t forced_by = -1;
};

// The placement of one method of a lowered program.
struct MethodPlacement {
  // Per node: the device its result lives on (a delegate: its module's
  // device; scalars and the output node: the host).
  std::vector<Device> device;
  // Per node: the copy it is, when it is one.
  std::vector<std::optional<CopyInfo>> copy;
  // Per node: whether it is a host write that forced a fresh copy.
  std::vector<char> forcing_write;
  // Per node: the delegate a getitem reads, or -1.
  std::vector<int32_t> delegate_of;
};

MethodPlacement PlacementOf(const Program& program, const Method& method);

struct GraphOptions {
  // Always draw the summary view.
  bool summary = false;
  // Methods with more nodes than this are drawn summarised.
  int64_t summary_above = 400;
};

// The DOT text of every method of `program` (a lowered, imported program).
std::string PlacementDot(const Program& program, const GraphOptions& options);

// `ferry show`'s text: methods, nodes per device, delegates, copies and
// their bytes (and how many a host write forced), memory plan per device.
std::string PlacementSummary(const Program& program);

// The fill colour of values on `device`, "#rrggbb": grey for the host,
// cuda:N the palette's N-th colour (cycling).
std::string DeviceColor(Device device);

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_GRAPH_DOT_H_
