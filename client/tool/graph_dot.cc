#include "client/tool/graph_dot.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/alias.h"
#include "passes/place_and_copy.h"

namespace ferry::tool {
namespace {

constexpr char kHostColor[] = "#e0e0e0";
constexpr const char* kDevicePalette[] = {"#8ecae6", "#ffb703", "#90be6d",
                                          "#f4a261", "#cdb4db", "#b5e48c",
                                          "#ffafcc", "#a8dadc"};
constexpr char kH2DColor[] = "#e63946";
constexpr char kD2HColor[] = "#7b2cbf";
constexpr char kForcedColor[] = "#ff006e";

// A DOT quoted string; `\n` in the result is DOT's line break only where the
// caller joined lines with Lines().
std::string Escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}
std::string Quote(std::string_view text) {
  return absl::StrCat("\"", Escape(text), "\"");
}
// Label lines, each escaped, joined with DOT's centred line break.
std::string Lines(const std::vector<std::string>& lines) {
  std::vector<std::string> escaped;
  for (const std::string& line : lines) escaped.push_back(Escape(line));
  return absl::StrCat("\"", absl::StrJoin(escaped, "\\n"), "\"");
}

std::string Bytes(int64_t bytes) {
  if (bytes < 10 * 1024) return absl::StrCat(bytes, " B");
  if (bytes < 10 * 1024 * 1024)
    return absl::StrCat(bytes / 1024, " KiB (", bytes, " B)");
  return absl::StrCat(bytes / (1024 * 1024), " MiB (", bytes, " B)");
}

std::string ShortOp(std::string_view op) {
  if (op.starts_with("aten::")) op.remove_prefix(6);
  return std::string(op);
}

std::string SpecText(const TensorSpec& spec) {
  return absl::StrCat(std::string(DTypeName(spec.dtype)), "[",
                      absl::StrJoin(spec.sizes, ","), "]");
}

// "conv ×3, relu ×2, ..." for the calls of `nodes`, most frequent first.
std::string TopOps(const std::vector<const Node*>& nodes, int shown) {
  std::map<std::string, int> count;
  for (const Node* node : nodes)
    if (node->kind == NodeKind::kCall) ++count[ShortOp(node->target)];
  std::vector<std::pair<std::string, int>> ops(count.begin(), count.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
    return a.second > b.second;
  });
  std::vector<std::string> parts;
  for (size_t i = 0; i < ops.size() && static_cast<int>(i) < shown; ++i)
    parts.push_back(absl::StrCat(ops[i].first, " x", ops[i].second));
  if (ops.size() > static_cast<size_t>(shown)) parts.push_back("...");
  return absl::StrJoin(parts, ", ");
}

std::string InputKindLabel(InputKind kind) {
  switch (kind) {
    case InputKind::kUserInput:
      return "input";
    case InputKind::kParameter:
      return "parameter";
    case InputKind::kBuffer:
      return "buffer";
    case InputKind::kMutableBuffer:
      return "mutable buffer";
    case InputKind::kLiftedConstant:
      return "lifted constant";
    case InputKind::kInvalid:
      break;
  }
  return "input";
}

std::string CopyLabel(const CopyInfo& copy) {
  return absl::StrCat(copy.h2d ? "H2D " : "D2H ",
                      copy.at_load ? "at load " : "", Bytes(copy.bytes));
}

// Per node, the nodes that read it, in node order.
std::vector<std::vector<int32_t>> Readers(const Method& method) {
  std::vector<std::vector<int32_t>> readers(method.nodes.size());
  for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
    std::set<int32_t> seen;
    ForEachOperand(method.nodes[i], [&](ValueId v) {
      if (v.node >= 0 && v.node < i && seen.insert(v.node).second)
        readers[v.node].push_back(i);
    });
  }
  return readers;
}

// The producers a node reads, each once, in argument order.
std::vector<int32_t> Operands(const Node& node, int32_t self) {
  std::vector<int32_t> out;
  ForEachOperand(node, [&](ValueId v) {
    if (v.node >= 0 && v.node < self &&
        std::find(out.begin(), out.end(), v.node) == out.end())
      out.push_back(v.node);
  });
  return out;
}

std::string DeviceKey(Device d) { return d.is_host() ? "host" : d.ToString(); }

std::set<Device> DevicesOf(const Program& program) {
  std::set<Device> devices{Device::Cpu()};
  for (const Method& method : program.methods) {
    const MethodPlacement placement = PlacementOf(program, method);
    devices.insert(placement.device.begin(), placement.device.end());
  }
  return devices;
}

// ---------------------------------------------------------------------------
// The DOT writer: one method, full or summarised.

class DotWriter {
 public:
  DotWriter(const Program& program, const ProgramIndex& index,
            const Method& method, std::string prefix)
      : program_(program),
        index_(index),
        method_(method),
        placement_(PlacementOf(program, method)),
        readers_(Readers(method)),
        prefix_(std::move(prefix)) {}

  std::string Full() {
    std::string out;
    std::map<Device, std::vector<int32_t>> delegates;  // by device
    for (int32_t i = 0; i < N(); ++i) {
      const Node& node = method_.nodes[i];
      if (node.kind == NodeKind::kDelegate) {
        delegates[placement_.device[i]].push_back(i);
        continue;
      }
      if (placement_.delegate_of[i] >= 0)
        continue;  // in its delegate's cluster
      absl::StrAppend(&out, "  ", NodeStatement(i), "\n");
    }
    for (const auto& [device, nodes] : delegates) {
      absl::StrAppend(
          &out, "  subgraph ",
          Quote(absl::StrCat("cluster_device:", prefix_, DeviceKey(device))),
          " {\n    label=",
          Quote(absl::StrCat(device.ToString(), " (", nodes.size(),
                             nodes.size() == 1 ? " delegate)" : " delegates)")),
          "; style=\"rounded,bold\"; color=\"#555555\";\n");
      for (int32_t d : nodes) {
        absl::StrAppend(
            &out, "    subgraph ",
            Quote(absl::StrCat("cluster_delegate:", prefix_,
                               method_.nodes[d].name)),
            " {\n      label=\"\"; style=dashed; color=\"#999999\";\n",
            "      ", NodeStatement(d), "\n");
        for (int32_t r : readers_[d])
          if (placement_.delegate_of[r] == d)
            absl::StrAppend(&out, "      ", NodeStatement(r), "\n");
        absl::StrAppend(&out, "    }\n");
      }
      absl::StrAppend(&out, "  }\n");
    }
    for (int32_t i = 0; i < N(); ++i) {
      for (int32_t p : Operands(method_.nodes[i], i))
        absl::StrAppend(&out, "  ", EdgeStatement(p, i), "\n");
      // Program data would all sit in the top row (dot ranks sources
      // first): an invisible edge from the node before its first reader
      // draws it next to where it is read.
      if (IsProgramDataNode(method_.nodes[i]) && !readers_[i].empty()) {
        int32_t anchor = readers_[i].front() - 1;
        while (anchor >= 0 &&
               (anchor == i || IsProgramDataNode(method_.nodes[anchor])))
          --anchor;
        if (anchor >= 0)
          absl::StrAppend(&out, "  ", Id(anchor), " -> ", Id(i),
                          " [style=invis];\n");
      }
      if (placement_.copy[i] && placement_.copy[i]->forced_by >= 0) {
        const int32_t w = placement_.copy[i]->forced_by;
        absl::StrAppend(
            &out, "  ", Id(w), " -> ", Id(i), " [id=",
            Quote(absl::StrCat("forced:", prefix_, method_.nodes[i].name)),
            ", class=\"forced\", style=dashed, color=\"", kForcedColor,
            "\", fontcolor=\"", kForcedColor,
            "\", label=\"forces a fresh copy\"];\n");
      }
    }
    return out;
  }

  std::string Summary() {
    // Blocks: every input/constant in one, each delegate (with its
    // getitems), each run of host nodes between delegates, the output.
    std::vector<int32_t> block(N(), -1);
    struct Block {
      std::string id;
      std::vector<std::string> label;
      std::optional<Device> cluster;  // delegates: their device
      std::vector<const Node*> nodes;
      int forcing_writes = 0;
    };
    std::vector<Block> blocks;
    auto add = [&](std::string id) {
      blocks.push_back(Block{absl::StrCat(prefix_, id), {}, {}, {}, 0});
      return static_cast<int32_t>(blocks.size()) - 1;
    };
    int32_t inputs = -1, run = -1;
    int runs = 0;
    for (int32_t i = 0; i < N(); ++i) {
      const Node& node = method_.nodes[i];
      if (placement_.copy[i]) continue;  // an edge, not a box
      int32_t b;
      if (node.kind == NodeKind::kInput || node.kind == NodeKind::kConstant) {
        if (inputs < 0) inputs = add("inputs");
        b = inputs;
      } else if (node.kind == NodeKind::kDelegate) {
        b = add(absl::StrCat("delegate:", node.name));
        blocks[b].cluster = placement_.device[i];
        blocks[b].label = {node.name,
                           absl::StrCat("module ", node.target.str())};
        if (const LoweredModule* m = index_.FindModule(node.target)) {
          std::vector<const Node*> inner;
          for (const Node& n : m->graph.nodes) inner.push_back(&n);
          blocks[b].label.push_back(absl::StrCat(m->graph.nodes.size(),
                                                 " nodes: ", TopOps(inner, 3)));
        }
        run = -1;
      } else if (placement_.delegate_of[i] >= 0) {
        b = block[placement_.delegate_of[i]];
      } else if (node.kind == NodeKind::kOutput) {
        b = add("output");
        blocks[b].label = {"output"};
      } else {
        if (run < 0) run = add(absl::StrCat("host:", runs++));
        b = run;
      }
      block[i] = b;
      blocks[b].nodes.push_back(&node);
      if (placement_.forcing_write[i]) ++blocks[b].forcing_writes;
    }
    if (inputs >= 0) {
      std::map<std::string, int> kinds;
      for (const Node* n : blocks[inputs].nodes)
        ++kinds[n->kind == NodeKind::kConstant ? "constant"
                                               : InputKindLabel(n->input_kind)];
      std::vector<std::string> parts;
      for (const auto& [kind, count] : kinds)
        parts.push_back(absl::StrCat(count, " ", kind, count == 1 ? "" : "s"));
      blocks[inputs].label = {"inputs", absl::StrJoin(parts, ", ")};
    }
    for (Block& b : blocks) {
      if (!b.label.empty()) continue;  // a host run
      b.label = {absl::StrCat("host: ", b.nodes.size(),
                              b.nodes.size() == 1 ? " node" : " nodes"),
                 TopOps(b.nodes, 3)};
    }

    // Edges between blocks: plain data edges, and the copies aggregated by
    // (from, to, direction).
    struct CopyEdge {
      int count = 0;
      int64_t bytes = 0;
      int forced = 0;
    };
    std::set<std::pair<int32_t, int32_t>> data;
    std::map<std::tuple<int32_t, int32_t, bool>, CopyEdge> copies;
    auto origin = [&](int32_t n) {
      while (placement_.copy[n]) n = placement_.copy[n]->source;
      return n;
    };
    for (int32_t i = 0; i < N(); ++i) {
      if (placement_.copy[i]) {
        const CopyInfo& c = *placement_.copy[i];
        const int32_t from = block[origin(i)];
        std::set<int32_t> to;
        std::vector<int32_t> pending = readers_[i];
        while (!pending.empty()) {
          const int32_t r = pending.back();
          pending.pop_back();
          // An H2D reading this copy (a D2H) draws its own edge from
          // the same origin.
          if (placement_.copy[r] && c.h2d)
            pending.insert(pending.end(), readers_[r].begin(),
                           readers_[r].end());
          else if (!placement_.copy[r])
            to.insert(block[r]);
        }
        for (int32_t t : to) {
          CopyEdge& e = copies[{from, t, c.h2d}];
          ++e.count;
          e.bytes += c.bytes;
          if (c.forced_by >= 0) ++e.forced;
        }
        continue;
      }
      for (int32_t p : Operands(method_.nodes[i], i))
        if (!placement_.copy[p] && block[p] != block[i])
          data.insert({block[p], block[i]});
    }

    std::string out;
    std::map<Device, std::vector<int32_t>> clustered;
    for (int32_t b = 0; b < static_cast<int32_t>(blocks.size()); ++b) {
      if (blocks[b].cluster) {
        clustered[*blocks[b].cluster].push_back(b);
        continue;
      }
      absl::StrAppend(&out, "  ",
                      BlockStatement(blocks[b].id, blocks[b].label,
                                     Device::Cpu(), blocks[b].forcing_writes),
                      "\n");
    }
    for (const auto& [device, members] : clustered) {
      absl::StrAppend(
          &out, "  subgraph ",
          Quote(absl::StrCat("cluster_device:", prefix_, DeviceKey(device))),
          " {\n    label=",
          Quote(
              absl::StrCat(device.ToString(), " (", members.size(),
                           members.size() == 1 ? " delegate)" : " delegates)")),
          "; style=\"rounded,bold\"; color=\"#555555\";\n");
      for (int32_t b : members)
        absl::StrAppend(&out, "    ",
                        BlockStatement(blocks[b].id, blocks[b].label, device,
                                       blocks[b].forcing_writes),
                        "\n");
      absl::StrAppend(&out, "  }\n");
    }
    for (const auto& [from, to] : data)
      absl::StrAppend(&out, "  ", Quote(blocks[from].id), " -> ",
                      Quote(blocks[to].id), ";\n");
    for (const auto& [key, e] : copies) {
      const auto& [from, to, h2d] = key;
      std::string label = absl::StrCat(h2d ? "H2D" : "D2H", " x", e.count, ", ",
                                       Bytes(e.bytes));
      if (e.forced)
        absl::StrAppend(&label, "\n", e.forced, " forced by host writes");
      absl::StrAppend(&out, "  ", Quote(blocks[from].id), " -> ",
                      Quote(blocks[to].id), " [id=",
                      Quote(absl::StrCat("copies:", blocks[from].id, "->",
                                         blocks[to].id, h2d ? ":h2d" : ":d2h")),
                      ", class=", h2d ? "\"copy h2d\"" : "\"copy d2h\"",
                      ", penwidth=3, color=\"", h2d ? kH2DColor : kD2HColor,
                      "\", fontcolor=\"", h2d ? kH2DColor : kD2HColor,
                      "\", label=", Lines({label}),
                      e.forced ? ", style=bold" : "", "];\n");
    }
    return out;
  }

 private:
  int32_t N() const { return static_cast<int32_t>(method_.nodes.size()); }
  std::string Id(int32_t i) const {
    return Quote(absl::StrCat(prefix_, method_.nodes[i].name));
  }

  std::string BlockStatement(const std::string& id,
                             std::vector<std::string> label, Device device,
                             int forcing_writes) const {
    std::string attrs = absl::StrCat("fillcolor=\"", DeviceColor(device), "\"");
    if (forcing_writes > 0) {
      label.push_back(absl::StrCat("(!) ", forcing_writes,
                                   " host write(s) forced a fresh copy"));
      absl::StrAppend(&attrs, ", class=\"forcing-write\", color=\"",
                      kForcedColor, "\", penwidth=3, peripheries=2");
    }
    return absl::StrCat(Quote(id), " [label=", Lines(label), ", ", attrs, "];");
  }

  std::string NodeStatement(int32_t i) const {
    const Node& node = method_.nodes[i];
    std::vector<std::string> label{node.name};
    std::string shape = "box";
    const TensorSpec* spec = node.Spec();
    const std::string spec_text = spec ? SpecText(*spec) : "";
    std::string extra;
    switch (node.kind) {
      case NodeKind::kInput:
        label.push_back(
            absl::StrCat(InputKindLabel(node.input_kind), " ", spec_text));
        shape = "invhouse";
        break;
      case NodeKind::kConstant:
        label.push_back(absl::StrCat("constant ", spec_text));
        shape = "invhouse";
        break;
      case NodeKind::kCall:
        if (const std::optional<CopyInfo>& copy = placement_.copy[i]) {
          label.push_back(absl::StrCat(
              copy->h2d ? "H2D to " : "D2H from ",
              copy->h2d ? placement_.device[i].ToString()
                        : placement_.device[copy->source].ToString()));
          shape = "cds";
          absl::StrAppend(&extra, ", class=\"copy-node\"");
        } else {
          label.push_back(absl::StrCat(ShortOp(node.target), " ", spec_text));
        }
        break;
      case NodeKind::kDelegate: {
        label.push_back(absl::StrCat("module ", node.target.str()));
        if (const LoweredModule* m = index_.FindModule(node.target)) {
          std::vector<const Node*> inner;
          for (const Node& n : m->graph.nodes) inner.push_back(&n);
          label.push_back(
              absl::StrCat(m->backend, ", ", m->graph.nodes.size(), " nodes"));
          label.push_back(TopOps(inner, 3));
        }
        shape = "box3d";
        absl::StrAppend(&extra, ", class=\"delegate\"");
        break;
      }
      case NodeKind::kGetItem:
        label.push_back(absl::StrCat("[", node.getitem_index, "] ", spec_text));
        shape = "ellipse";
        break;
      case NodeKind::kOutput:
        shape = "house";
        break;
    }
    if (placement_.forcing_write[i]) {
      label.push_back("(!) host write: forces a fresh copy");
      absl::StrAppend(&extra, ", class=\"forcing-write\", color=\"",
                      kForcedColor, "\", penwidth=3, peripheries=2");
    }
    const std::string fill = node.kind == NodeKind::kOutput
                                 ? "#ffffff"
                                 : DeviceColor(placement_.device[i]);
    return absl::StrCat(Id(i), " [label=", Lines(label), ", shape=", shape,
                        ", fillcolor=\"", fill, "\"", extra, "];");
  }

  std::string EdgeStatement(int32_t from, int32_t to) const {
    const std::optional<CopyInfo>& copy = placement_.copy[to];
    if (!copy) {
      if (placement_.copy[from]) {  // out of a copy: the destination's colour
        return absl::StrCat(Id(from), " -> ", Id(to), " [color=\"",
                            placement_.copy[from]->h2d ? kH2DColor : kD2HColor,
                            "\", penwidth=1.5];");
      }
      return absl::StrCat(Id(from), " -> ", Id(to), ";");
    }
    std::vector<std::string> label{CopyLabel(*copy)};
    std::string style;
    if (copy->forced_by >= 0) {
      label.push_back(absl::StrCat("fresh after host write '",
                                   method_.nodes[copy->forced_by].name, "'"));
      style = ", style=bold";
    }
    const char* color = copy->h2d ? kH2DColor : kD2HColor;
    return absl::StrCat(
        Id(from), " -> ", Id(to),
        " [id=", Quote(absl::StrCat("copy:", prefix_, method_.nodes[to].name)),
        ", class=", copy->h2d ? "\"copy h2d\"" : "\"copy d2h\"",
        ", penwidth=3, color=\"", color, "\", fontcolor=\"", color,
        "\", label=", Lines(label), style, "];");
  }

  const Program& program_;
  const ProgramIndex& index_;
  const Method& method_;
  const MethodPlacement placement_;
  const std::vector<std::vector<int32_t>> readers_;
  const std::string prefix_;
};

std::string Legend(const std::set<Device>& devices, bool summary) {
  std::string rows;
  for (Device d : devices)
    absl::StrAppend(&rows, "<TR><TD BGCOLOR=\"", DeviceColor(d),
                    "\" WIDTH=\"24\"></TD><TD ALIGN=\"LEFT\">",
                    d.is_host() ? "host (cpu)" : d.ToString(), "</TD></TR>");
  auto line = [&](const char* color, const char* text) {
    absl::StrAppend(&rows, "<TR><TD><FONT COLOR=\"", color,
                    "\"><B>&#8594;</B></FONT></TD><TD ALIGN=\"LEFT\"><FONT "
                    "COLOR=\"",
                    color, "\">", text, "</FONT></TD></TR>");
  };
  line(kH2DColor, "H2D copy, bytes per call");
  line(kD2HColor, "D2H copy, bytes per call");
  line(kForcedColor, "(!) host write that forced a fresh copy");
  absl::StrAppend(&rows, "<TR><TD>[ ]</TD><TD ALIGN=\"LEFT\">",
                  summary ? "box: a delegate, or a run of host nodes"
                          : "cluster: the delegates on one device",
                  "</TD></TR>");
  return absl::StrCat(
      "  subgraph \"cluster_legend\" {\n    label=\"legend\"; style=rounded; "
      "color=\"#999999\";\n    \"legend\" [shape=plaintext, style=\"\", "
      "label=<<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" "
      "CELLPADDING=\"3\">",
      rows, "</TABLE>>];\n  }\n");
}

}  // namespace

std::string DeviceColor(Device device) {
  if (device.is_host()) return kHostColor;
  constexpr size_t n = sizeof(kDevicePalette) / sizeof(kDevicePalette[0]);
  return kDevicePalette[static_cast<size_t>(device.index) % n];
}

MethodPlacement PlacementOf(const Program& program, const Method& method) {
  const ProgramIndex index(program);
  const int32_t n = static_cast<int32_t>(method.nodes.size());
  MethodPlacement p;
  p.device.assign(n, Device::Cpu());
  p.copy.assign(n, std::nullopt);
  p.forcing_write.assign(n, 0);
  p.delegate_of.assign(n, -1);
  const StorageRoots roots(method);
  // The coherence of each storage root, as place_and_copy's walk keeps it:
  // where the storage is valid, and the devices a host write invalidated
  // (with the writer).
  absl::flat_hash_map<ValueId, std::set<Device>> valid;
  absl::flat_hash_map<ValueId, std::map<Device, int32_t>> invalidated;
  for (int32_t i = 0; i < n; ++i) {
    const Node& node = method.nodes[i];
    if (node.kind == NodeKind::kDelegate) {
      p.device[i] = DelegateDevice(index, node);
    } else if (const TensorSpec* spec = node.Spec()) {
      p.device[i] = spec->device;
    } else if (node.result == ResultKind::kTuple && !node.tuple.empty()) {
      p.device[i] = node.tuple[0].device;
    }
    if (node.kind == NodeKind::kGetItem && node.getitem_source >= 0 &&
        node.getitem_source < i &&
        method.nodes[node.getitem_source].kind == NodeKind::kDelegate)
      p.delegate_of[i] = node.getitem_source;

    const bool h2d = IsH2DCopy(node), d2h = IsD2HCopy(node);
    if ((h2d || d2h) && !node.args.empty() && node.args[0].is_value() &&
        node.args[0].value.node >= 0 && node.args[0].value.node < i) {
      const ValueId source = node.args[0].value;
      CopyInfo copy;
      copy.h2d = h2d;
      copy.at_load = node.at_load;
      copy.bytes = node.tensor.StorageBytes().value_or(0);
      copy.source = source.node;
      if (d2h) {
        // A fresh host storage, coherent with the device it came from.
        const Device from =
            method.Spec(source) ? method.Spec(source)->device : Device::Cpu();
        valid[roots.RootOfNode(i)] = {Device::Cpu(), from};
      } else {
        const ValueId root = roots.RootOf(source);
        const Device to = p.device[i];
        auto& lost = invalidated[root];
        if (auto it = lost.find(to); it != lost.end()) {
          copy.forced_by = it->second;
          p.forcing_write[it->second] = 1;
          lost.erase(it);
        }
        valid[root].insert(to);
      }
      p.copy[i] = copy;
      continue;
    }
    if (node.kind != NodeKind::kCall) continue;
    for (const ValueId& written : roots.WrittenBy(i)) {
      const ValueId root = roots.RootOf(written);
      auto it = valid.find(root);
      if (it == valid.end()) continue;
      for (Device d : it->second)
        if (!d.is_host()) invalidated[root][d] = i;
      it->second = {Device::Cpu()};
    }
  }
  return p;
}

std::string PlacementDot(const Program& program, const GraphOptions& options) {
  const ProgramIndex index(program);
  const bool several = program.methods.size() > 1;
  bool any_summary = false;
  // Global ranking (newrank) keeps a chain of delegates and host nodes
  // top to bottom; dot's cluster-wise ranking lays a device's delegates side
  // by side. newrank's crossing minimisation takes minutes once one device
  // cluster holds a few dozen delegates, so past kNewrankDelegates it is off.
  constexpr int64_t kNewrankDelegates = 24;
  int64_t most_delegates = 0;
  std::string body;
  for (const Method& method : program.methods) {
    std::map<Device, int64_t> per_device;
    const MethodPlacement placement = PlacementOf(program, method);
    for (size_t i = 0; i < method.nodes.size(); ++i)
      if (method.nodes[i].kind == NodeKind::kDelegate)
        most_delegates =
            std::max(most_delegates, ++per_device[placement.device[i]]);
    const bool summary =
        options.summary ||
        static_cast<int64_t>(method.nodes.size()) > options.summary_above;
    any_summary |= summary;
    const std::string prefix = several ? absl::StrCat(method.name, "/") : "";
    DotWriter writer(program, index, method, prefix);
    std::string drawn = summary ? writer.Summary() : writer.Full();
    if (several) {
      absl::StrAppend(&body, "  subgraph ",
                      Quote(absl::StrCat("cluster_method:", method.name)),
                      " {\n  label=",
                      Quote(absl::StrCat("method ", method.name,
                                         summary ? " (summary)" : "")),
                      "; style=rounded; color=\"#333333\";\n", drawn, "  }\n");
    } else {
      body += drawn;
    }
  }
  std::string title =
      several || program.methods.empty()
          ? std::string("placement")
          : absl::StrCat("placement of ", program.methods[0].name,
                         any_summary ? " (summary)" : "");
  return absl::StrCat(
      "digraph placement {\n  label=", Quote(title), "; labelloc=t; ",
      most_delegates <= kNewrankDelegates ? "newrank=true; " : "",
      "rankdir=TB; ranksep=0.35; nodesep=0.25; "
      "fontname=\"Helvetica\";\n"
      "  node [shape=box, style=\"filled,rounded\", fontname=\"Helvetica\", "
      "fontsize=10];\n  edge [color=\"#666666\", arrowsize=0.6, "
      "fontname=\"Helvetica\", fontsize=9];\n",
      body, Legend(DevicesOf(program), any_summary), "}\n");
}

std::string PlacementSummary(const Program& program) {
  const ProgramIndex index(program);
  std::string out = absl::StrCat(
      program.methods.size(),
      program.methods.size() == 1 ? " method, " : " methods, ",
      program.modules.size(),
      program.modules.size() == 1 ? " lowered module, " : " lowered modules, ",
      program.constants.size(),
      program.constants.size() == 1 ? " constant\n" : " constants\n");
  for (const Method& method : program.methods) {
    const MethodPlacement p = PlacementOf(program, method);
    std::map<Device, int64_t> nodes, delegates;
    int64_t h2d = 0, d2h = 0, h2d_bytes = 0, d2h_bytes = 0, at_load = 0;
    std::vector<std::string> forced;
    for (size_t i = 0; i < method.nodes.size(); ++i) {
      const Node& node = method.nodes[i];
      if (node.kind == NodeKind::kOutput) continue;
      ++nodes[p.device[i]];
      if (node.kind == NodeKind::kDelegate) ++delegates[p.device[i]];
      if (!p.copy[i]) continue;
      const CopyInfo& c = *p.copy[i];
      if (c.at_load) {
        ++at_load;
      } else if (c.h2d) {
        ++h2d;
        h2d_bytes += c.bytes;
      } else {
        ++d2h;
        d2h_bytes += c.bytes;
      }
      if (c.forced_by >= 0)
        forced.push_back(absl::StrCat(node.name, " after '",
                                      method.nodes[c.forced_by].name, "'"));
    }
    auto per_device = [](const std::map<Device, int64_t>& counts) {
      std::vector<std::string> parts;
      for (const auto& [d, count] : counts)
        parts.push_back(absl::StrCat(d.ToString(), ": ", count));
      return absl::StrJoin(parts, ", ");
    };
    int64_t total_delegates = 0;
    for (const auto& [d, count] : delegates) total_delegates += count;
    absl::StrAppend(&out, "method ", method.name, ": ", method.nodes.size(),
                    " nodes (", per_device(nodes), ")\n");
    absl::StrAppend(&out, "  delegates: ", total_delegates);
    if (total_delegates)
      absl::StrAppend(&out, " (", per_device(delegates), ")");
    absl::StrAppend(&out, "\n  copies per call: ", h2d, " H2D (", h2d_bytes,
                    " B), ", d2h, " D2H (", d2h_bytes, " B)");
    if (at_load) absl::StrAppend(&out, "; ", at_load, " at load");
    absl::StrAppend(&out,
                    "\n  fresh copies forced by host writes: ", forced.size());
    if (!forced.empty()) {
      constexpr size_t kNamed = 5;
      const size_t named = std::min(forced.size(), kNamed);
      absl::StrAppend(
          &out, " (",
          absl::StrJoin(forced.begin(), forced.begin() + named, ", "),
          forced.size() > named ? ", ..." : "", ")");
    }
    absl::StrAppend(&out, "\n");
    if (method.arenas.empty()) absl::StrAppend(&out, "  memory: not planned\n");
    for (const Arena& arena : method.arenas)
      absl::StrAppend(&out, "  memory ", arena.device.ToString(), ": ",
                      arena.size, " B (lower bound ", arena.lower_bound,
                      " B)\n");
  }
  return out;
}

}  // namespace ferry::tool
