// plan_memory: lifetimes, sharing and the lower bound, checked against an
// independent computation of the lifetimes.
#include "passes/plan_memory.h"

#include <map>

#include "ferry/v1/program.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/alias.h"
#include "passes/pipeline.h"
#include "tests/passes/test_programs.h"

namespace ferry {
namespace {

using namespace testing_util;

Program LowerText(const std::string& program, const std::string& options) {
  v1::LowerRequest request;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "program {" + program + "} options {" + options + "}", &request));
  absl::StatusOr<LowerResult> result = Lower(request);
  EXPECT_TRUE(result.ok() && result->ok)
      << FormatDiagnosticsText(result->diagnostics, "test");
  return std::move(result->program);
}

// No two planned roots of one arena whose lifetimes overlap share a byte.
void ExpectNoOverlap(const Method& m) {
  StorageRoots roots(m);
  struct Live {
    MemoryPlacement where;
    int32_t first, last;
    std::string name;
  };
  std::map<ValueId, Live> live;
  for (int32_t i = 0; i < static_cast<int32_t>(m.nodes.size()); ++i) {
    const Node& n = m.nodes[i];
    auto define = [&](ValueId v, const TensorSpec& s) {
      if (roots.RootOf(v) == v && s.memory.planned)
        live[v] = Live{s.memory, n.kind == NodeKind::kInput ? 0 : i, i,
                       m.ValueName(v)};
    };
    if (n.result == ResultKind::kTensor) define(ValueId{i, -1}, n.tensor);
    for (int32_t e = 0; e < static_cast<int32_t>(n.tuple.size()); ++e)
      define(ValueId{i, e}, n.tuple[e]);
    ForEachOperand(n, [&](const ValueId& v) {
      auto it = live.find(roots.RootOf(v));
      if (it != live.end()) it->second.last = i;
    });
  }
  for (auto a = live.begin(); a != live.end(); ++a)
    for (auto b = std::next(a); b != live.end(); ++b) {
      const Live& x = a->second;
      const Live& y = b->second;
      if (x.where.arena != y.where.arena) continue;
      bool time = x.first <= y.last && y.first <= x.last;
      bool space = x.where.offset < y.where.offset + y.where.size &&
                   y.where.offset < x.where.offset + x.where.size;
      EXPECT_FALSE(time && space && x.where.size && y.where.size)
          << x.name << " and " << y.name << " overlap";
    }
  for (const Arena& arena : m.arenas) EXPECT_GE(arena.size, arena.lower_bound);
}

TEST(PlanMemory, ChainReusesFreedBytes) {
  Program p = LowerText(
      MethodText("f", Input("a") + Call("b", "aten::sin", {"a"}) +
                          Call("c", "aten::cos", {"b"}) +
                          Call("d", "aten::exp", {"c"}) +
                          Call("e", "aten::neg", {"d"}) + Output({"e"})),
      "");
  const Method& m = p.methods[0];
  ASSERT_EQ(m.arenas.size(), 1u);
  EXPECT_EQ(m.arenas[0].size, 2 * 64);  // never more than two in flight
  EXPECT_EQ(m.arenas[0].size, m.arenas[0].lower_bound);
  ExpectNoOverlap(m);
}

TEST(PlanMemory, ViewsAndInPlaceResultsShareTheirRoot) {
  Program p =
      LowerText(MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}) +
                                    Call("v", "aten::view", {"t"}, "", {16},
                                         "args { ints { values: 16 } }") +
                                    Call("r", "aten::relu_", {"v"}, "", {16}) +
                                    Call("s", "aten::cos", {"a"}) +
                                    Call("o", "aten::add.Tensor", {"s", "t"}) +
                                    Output({"o"})),
                "");
  const Method& m = p.methods[0];
  const MemoryPlacement& t = m.nodes[Find(m, "t")].tensor.memory;
  EXPECT_TRUE(t.planned);
  EXPECT_EQ(m.nodes[Find(m, "v")].tensor.memory, t);
  EXPECT_EQ(m.nodes[Find(m, "r")].tensor.memory, t);
  ExpectNoOverlap(m);
}

TEST(PlanMemory, HostWriteBetweenDelegatesPlansEveryDevice) {
  Program p = LowerText(
      MethodText("f", Input("a") + Input("b") + Input("c") +
                          Call("t", "aten::add.Tensor", {"a", "b"}, "d0") +
                          Call("r", "aten::relu_", {"t"}) +
                          Call("u", "aten::add.Tensor", {"t", "c"}, "d1") +
                          Output({"u"})),
      "partitioner { tag_targets { key: \"d0\" value: \"cuda:0\" } "
      "tag_targets { key: \"d1\" value: \"cuda:1\" } }");
  const Method& m = p.methods[0];
  ASSERT_EQ(m.arenas.size(), 3u);
  EXPECT_TRUE(m.arenas[0].device.is_host());
  EXPECT_EQ(m.arenas[1].device, Device::Cuda(0));
  EXPECT_EQ(m.arenas[2].device, Device::Cuda(1));
  // The relu_ result is the host copy of t: its bytes stay reserved until
  // the copy to cuda:1 has read them.
  EXPECT_EQ(m.nodes[Find(m, "r")].tensor.memory,
            m.nodes[Find(m, "t_to_cpu")].tensor.memory);
  ExpectNoOverlap(m);
}

TEST(PlanMemory, GraphInputsAndOutputsFollowTheAllocOptions) {
  const std::string program =
      MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}) +
                          Call("u", "aten::cos", {"t"}) + Output({"u"}));
  Program planned = LowerText(program, "");
  const Method& m = planned.methods[0];
  EXPECT_TRUE(m.nodes[Find(m, "a")].tensor.memory.planned);
  EXPECT_TRUE(m.nodes[Find(m, "u")].tensor.memory.planned);
  Program unplanned =
      LowerText(program, "alloc_graph_input: false alloc_graph_output: false");
  const Method& n = unplanned.methods[0];
  EXPECT_FALSE(n.nodes[Find(n, "a")].tensor.memory.planned);
  EXPECT_FALSE(n.nodes[Find(n, "u")].tensor.memory.planned);
  EXPECT_TRUE(n.nodes[Find(n, "t")].tensor.memory.planned);
}

TEST(PlanMemory, WithoutDevicePlanningEverythingIsInOneHostArena) {
  Program p = LowerText(
      MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}, "d0") +
                          Output({"t"})),
      "enable_non_cpu_memory_planning: false partitioner { tag_targets { "
      "key: \"d0\" value: \"cuda:0\" } }");
  const Method& m = p.methods[0];
  ASSERT_EQ(m.arenas.size(), 1u);
  EXPECT_TRUE(m.arenas[0].device.is_host());
  EXPECT_EQ(m.nodes[Find(m, "t")].tensor.device, Device::Cuda(0));
}

// A mutable buffer is state that must survive from one call to the next: no
// other value of the method may ever be planned over its bytes (checked
// here against the placements alone, whatever the lifetimes), whether or
// not graph inputs are allocated.
void ExpectBufferBytesAreItsOwn(const Method& m, const std::string& buffer) {
  StorageRoots roots(m);
  const int32_t b = Find(m, buffer);
  ASSERT_GE(b, 0);
  const MemoryPlacement& own = m.nodes[b].tensor.memory;
  ASSERT_TRUE(own.planned) << buffer << " is not planned";
  ASSERT_GT(own.size, 0);
  int others = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(m.nodes.size()); ++i) {
    const Node& n = m.nodes[i];
    auto check = [&](ValueId v, const TensorSpec& s) {
      if (roots.RootOf(v) == ValueId{b, -1} || !s.memory.planned ||
          s.memory.arena != own.arena || s.memory.size == 0)
        return;
      ++others;
      EXPECT_TRUE(s.memory.offset + s.memory.size <= own.offset ||
                  own.offset + own.size <= s.memory.offset)
          << m.ValueName(v) << " at [" << s.memory.offset << ", "
          << s.memory.offset + s.memory.size << ") overlaps " << buffer
          << " at [" << own.offset << ", " << own.offset + own.size << ")";
    };
    if (n.result == ResultKind::kTensor) check(ValueId{i, -1}, n.tensor);
    for (int32_t e = 0; e < static_cast<int32_t>(n.tuple.size()); ++e)
      check(ValueId{i, e}, n.tuple[e]);
  }
  EXPECT_GT(others, 2);  // there was something to keep out
}

TEST(PlanMemory, MutableBuffersAreNeverPlannedOver) {
  // buf is read and updated in place early; the chain after it would reuse
  // its bytes if its lifetime ended at its last reader.
  const std::string program =
      "constants { name: \"buf\" spec { dtype: F32 sizes: [4, 4] } }\n" +
      MethodText("f", Input("x") +
                          "nodes { name: \"buf\" input { kind: MUTABLE_BUFFER "
                          "target: \"buf\" } " +
                          Spec() + " }\n" +
                          Call("s", "aten::add.Tensor", {"buf", "x"}) +
                          Call("u", "aten::add_.Tensor", {"buf", "s"}) +
                          Call("a", "aten::sin", {"s"}) +
                          Call("b", "aten::cos", {"a"}) +
                          Call("c", "aten::exp", {"b"}) +
                          Call("d", "aten::neg", {"c"}) + Output({"d"}));
  for (const std::string options :
       {"", "alloc_graph_input: false alloc_graph_output: false"}) {
    SCOPED_TRACE(options);
    Program p = LowerText(program, options);
    const Method& m = p.methods[0];
    ExpectBufferBytesAreItsOwn(m, "buf");
    // The in-place update writes the buffer's own bytes.
    EXPECT_EQ(m.nodes[Find(m, "u")].tensor.memory,
              m.nodes[Find(m, "buf")].tensor.memory);
    ExpectNoOverlap(m);
  }
}

}  // namespace
}  // namespace ferry
