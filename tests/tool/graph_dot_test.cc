// The placement picture's analysis and DOT text (client/tool/graph_dot.h),
// on programs lowered in-process.
#include "client/tool/graph_dot.h"

#include <algorithm>
#include <string>

#include "ferry/v1/program.pb.h"
#include "gtest/gtest.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"
#include "tests/support/files.h"

namespace ferry::tool {
namespace {

Program LowerText(const std::string& text) {
  v1::LowerRequest request;
  bool bare = false;
  EXPECT_TRUE(
      ParseRequest(text, FileFormat::kText, "test", &request, &bare).ok());
  absl::StatusOr<LowerResult> result = Lower(request);
  EXPECT_TRUE(result.ok() && result->ok);
  return result.ok() ? result->program : Program{};
}

Program LowerExample(const std::string& name) {
  return LowerText(testing_util::ReadFile(std::string(FERRY_SOURCE_DIR) +
                                          "/examples/" + name));
}

int32_t IndexOf(const Method& method, const std::string& name) {
  for (size_t i = 0; i < method.nodes.size(); ++i)
    if (method.nodes[i].name == name) return static_cast<int32_t>(i);
  ADD_FAILURE() << "no node " << name;
  return -1;
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1))
    ++n;
  return n;
}

TEST(PlacementOf, HostReluForcesOneFreshCopy) {
  const Program program = LowerExample("host_relu_between_delegates.textproto");
  const Method& method = program.methods[0];
  const MethodPlacement p = PlacementOf(program, method);
  int forced = 0, h2d = 0, d2h = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    if (!p.copy[i]) continue;
    (p.copy[i]->h2d ? h2d : d2h)++;
    EXPECT_EQ(p.copy[i]->bytes, 64) << method.nodes[i].name;
    if (p.copy[i]->forced_by < 0) continue;
    ++forced;
    EXPECT_EQ(method.nodes[i].name, "t_to_cuda0_v1");
    EXPECT_EQ(method.nodes[p.copy[i]->forced_by].name, "r");
  }
  EXPECT_EQ(forced, 1);
  EXPECT_EQ(h2d, 4);
  EXPECT_EQ(d2h, 2);
  EXPECT_TRUE(p.forcing_write[IndexOf(method, "r")]);
  EXPECT_EQ(p.device[IndexOf(method, "delegate_d0")], Device::Cuda(0));
  EXPECT_EQ(p.device[IndexOf(method, "t_to_cpu")], Device::Cpu());
  EXPECT_EQ(p.delegate_of[IndexOf(method, "t")],
            IndexOf(method, "delegate_d0"));
}

// A write before the storage was ever on a device forces nothing: the copy
// was needed anyway.
TEST(PlacementOf, WriteBeforeFirstDeviceCopyForcesNothing) {
  const Program program = LowerText(R"pb(
    program {
      methods {
        name: "forward"
        nodes {
          name: "x"
          input { kind: USER_INPUT }
          tensor { dtype: F32 sizes: 8 }
        }
        nodes {
          name: "r"
          call {
            op: "aten::relu_"
            args { value: "x" }
          }
          tensor { dtype: F32 sizes: 8 }
        }
        nodes {
          name: "u"
          call {
            op: "aten::add.Tensor"
            args { value: "x" }
            args { value: "x" }
          }
          tensor { dtype: F32 sizes: 8 }
          delegation_tag: "d0"
        }
        nodes {
          name: "output"
          output { values { value: "u" } }
        }
      }
    }
    options { partitioner { tag_targets { key: "d0" value: "cuda:0" } } }
  )pb");
  const Method& method = program.methods[0];
  const MethodPlacement p = PlacementOf(program, method);
  int copies = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    EXPECT_FALSE(p.forcing_write[i]) << method.nodes[i].name;
    if (!p.copy[i]) continue;
    ++copies;
    EXPECT_EQ(p.copy[i]->forced_by, -1) << method.nodes[i].name;
    EXPECT_EQ(p.copy[i]->bytes, 32);
  }
  EXPECT_EQ(copies, 2);  // x to cuda:0, u back
  EXPECT_EQ(PlacementSummary(program).find("forced by host writes: 0") !=
                std::string::npos,
            true)
      << PlacementSummary(program);
}

TEST(PlacementDot, FullViewHasClustersCopyEdgesLegendAndMarker) {
  const Program program = LowerExample("host_relu_between_delegates.textproto");
  const std::string dot = PlacementDot(program, {});
  EXPECT_EQ(Count(dot, "subgraph \"cluster_device:"), 1u) << dot;
  EXPECT_EQ(Count(dot, "subgraph \"cluster_device:cuda:0\""), 1u);
  EXPECT_EQ(Count(dot, "subgraph \"cluster_delegate:"), 2u);
  EXPECT_EQ(Count(dot, "class=\"copy h2d\""), 4u);
  EXPECT_EQ(Count(dot, "class=\"copy d2h\""), 2u);
  EXPECT_EQ(Count(dot, "label=\"H2D 64 B"), 4u);
  EXPECT_EQ(Count(dot, "label=\"D2H 64 B\""), 2u);
  EXPECT_EQ(Count(dot, "fresh after host write 'r'"), 1u);
  EXPECT_EQ(Count(dot, "\"r\" -> \"t_to_cuda0_v1\" [id=\"forced:"), 1u);
  EXPECT_EQ(Count(dot, "class=\"forcing-write\""), 1u);
  EXPECT_EQ(Count(dot, "subgraph \"cluster_legend\""), 1u);
  EXPECT_NE(dot.find("host (cpu)"), std::string::npos);
  // Values coloured by device: cuda:0 nodes get the palette's first colour.
  EXPECT_NE(dot.find("\"t\" [label=\"t\\n[0] f32[4,4]\", shape=ellipse, "
                     "fillcolor=\"" +
                     DeviceColor(Device::Cuda(0)) + "\""),
            std::string::npos)
      << dot;
  EXPECT_NE(DeviceColor(Device::Cuda(0)), DeviceColor(Device::Cuda(1)));
  EXPECT_NE(DeviceColor(Device::Cpu()), DeviceColor(Device::Cuda(0)));
}

TEST(PlacementDot, SummaryViewHasOneBoxPerDelegateAndHostRun) {
  const Program program = LowerExample("host_relu_between_delegates.textproto");
  GraphOptions options;
  options.summary = true;
  const std::string dot = PlacementDot(program, options);
  // inputs, delegate_d0, the host run holding r, delegate_d1, output.
  for (const char* box :
       {"\"inputs\" [label=\"inputs\\n3 inputs\"",
        "\"delegate:delegate_d0\" [label=", "\"host:0\" [label=\"host: 1 node",
        "\"delegate:delegate_d1\" [label=", "\"output\" [label="})
    EXPECT_EQ(Count(dot, box), 1u) << box << "\n" << dot;
  EXPECT_EQ(Count(dot, "\"host:1\""), 0u);
  EXPECT_EQ(Count(dot, "shape=cds"), 0u);  // no copy nodes
  EXPECT_NE(dot.find("\"inputs\" -> \"delegate:delegate_d0\" "
                     "[id=\"copies:inputs->delegate:delegate_d0:h2d\""),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("label=\"H2D x2, 128 B\""), std::string::npos);
  EXPECT_NE(dot.find("H2D x1, 64 B\\n1 forced by host writes"),
            std::string::npos);
  EXPECT_EQ(Count(dot, "class=\"forcing-write\""), 1u);  // the host run
  EXPECT_NE(dot.find("(summary)"), std::string::npos);
}

TEST(PlacementDot, LargeMethodsAreSummarised) {
  const Program program = LowerExample("host_relu_between_delegates.textproto");
  GraphOptions options;
  options.summary_above = 5;  // the method has 15 nodes
  EXPECT_EQ(PlacementDot(program, options), [&] {
    GraphOptions summary;
    summary.summary = true;
    return PlacementDot(program, summary);
  }());
  options.summary_above = 15;
  EXPECT_EQ(Count(PlacementDot(program, options), "(summary)"), 0u);
}

TEST(PlacementDot, NamesAreEscaped) {
  Program program;
  Method method;
  method.name = "m";
  Node input;
  input.name = "a\"b\\c";
  input.kind = NodeKind::kInput;
  input.input_kind = InputKind::kUserInput;
  input.result = ResultKind::kTensor;
  input.tensor.dtype = DType::kF32;
  method.nodes.push_back(input);
  program.methods.push_back(method);
  const std::string dot = PlacementDot(program, {});
  EXPECT_NE(dot.find("\"a\\\"b\\\\c\" [label=\"a\\\"b\\\\c\\ninput f32[]\""),
            std::string::npos)
      << dot;
}

}  // namespace
}  // namespace ferry::tool
