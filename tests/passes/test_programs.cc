#include "tests/passes/test_programs.h"

#include "absl/strings/str_cat.h"
#include "ferry/v1/program.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/proto_io.h"

namespace ferry::testing_util {

std::string Spec(const std::vector<int64_t>& sizes, const std::string& dtype) {
  std::string s = absl::StrCat("tensor { dtype: ", dtype);
  for (int64_t v : sizes) absl::StrAppend(&s, " sizes: ", v);
  return s + " }";
}

std::string Input(const std::string& name, const std::vector<int64_t>& sizes) {
  return absl::StrCat("nodes { name: \"", name,
                      "\" input { kind: USER_INPUT } ", Spec(sizes), " }\n");
}

std::string Call(const std::string& name, const std::string& op,
                 const std::vector<std::string>& args, const std::string& tag,
                 const std::vector<int64_t>& sizes,
                 const std::string& extra_args) {
  std::string s = absl::StrCat("nodes { name: \"", name, "\" call { op: \"",
                               op, "\"");
  for (const std::string& a : args)
    absl::StrAppend(&s, " args { value: \"", a, "\" }");
  absl::StrAppend(&s, " ", extra_args, " } ", Spec(sizes));
  if (!tag.empty()) absl::StrAppend(&s, " delegation_tag: \"", tag, "\"");
  return s + " }\n";
}

std::string Output(const std::vector<std::string>& values) {
  std::string s = "nodes { name: \"output\" output {";
  for (const std::string& v : values)
    absl::StrAppend(&s, " values { value: \"", v, "\" }");
  return s + " } }\n";
}

std::string MethodText(const std::string& name, const std::string& nodes) {
  return absl::StrCat("methods { name: \"", name, "\"\n", nodes, "}\n");
}

Program ParseProgram(const std::string& text) {
  v1::Program proto;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &proto))
      << text;
  Diagnostics diagnostics;
  Program program = ImportProgram(proto, diagnostics);
  EXPECT_FALSE(diagnostics.HasErrors())
      << FormatDiagnosticsText(diagnostics, "test");
  return program;
}

LowerOptions ParseOptions(const std::string& text, const Program& program) {
  v1::LowerOptions proto;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &proto));
  Diagnostics diagnostics;
  LowerOptions options = ResolveOptions(proto, program, diagnostics);
  EXPECT_FALSE(diagnostics.HasErrors());
  return options;
}

int32_t Find(const Method& method, const std::string& name) {
  for (size_t i = 0; i < method.nodes.size(); ++i)
    if (method.nodes[i].name == name) return static_cast<int32_t>(i);
  return -1;
}

std::string NodeNames(const Method& method) {
  std::string s;
  for (const Node& n : method.nodes) absl::StrAppend(&s, s.empty() ? "" : " ", n.name);
  return s;
}

int CountOp(const Method& method, const std::string& op) {
  int count = 0;
  for (const Node& n : method.nodes)
    if (n.kind == NodeKind::kCall && n.target == op) ++count;
  return count;
}

}  // namespace ferry::testing_util
