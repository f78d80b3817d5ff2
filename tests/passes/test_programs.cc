#include "tests/passes/test_programs.h"

#include "absl/strings/str_cat.h"
#include "ferry/v1/report.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/proto_io.h"
#include "passes/report_io.h"

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
  std::string s =
      absl::StrCat("nodes { name: \"", name, "\" call { op: \"", op, "\"");
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

int32_t Find(const Method& method, const std::string& name) {
  for (size_t i = 0; i < method.nodes.size(); ++i)
    if (method.nodes[i].name == name) return static_cast<int32_t>(i);
  return -1;
}

std::string NodeNames(const Method& method) {
  std::string s;
  for (const Node& n : method.nodes)
    absl::StrAppend(&s, s.empty() ? "" : " ", n.name);
  return s;
}

int CountOp(const Method& method, const std::string& op) {
  int count = 0;
  for (const Node& n : method.nodes)
    if (n.kind == NodeKind::kCall && n.target == op) ++count;
  return count;
}

std::string ArgsOf(const Method& method, const std::string& name) {
  std::string s;
  ForEachOperand(method.nodes[Find(method, name)], [&](const ValueId& v) {
    absl::StrAppend(&s, s.empty() ? "" : " ", method.ValueName(v));
  });
  return s;
}

std::string ResultText(const absl::StatusOr<LowerResult>& result) {
  if (!result.ok()) return "status: " + result.status().ToString();
  v1::LowerReport report = LowerReportToProto(*result);
  for (v1::PassStats& pass : *report.mutable_stats()->mutable_passes())
    pass.set_micros(0);
  v1::Program program;
  ExportProgram(result->program, &program);
  std::string report_text, program_text;
  google::protobuf::TextFormat::PrintToString(report, &report_text);
  google::protobuf::TextFormat::PrintToString(program, &program_text);
  return report_text + program_text;
}

std::string Binary(const v1::LowerRequest& request) {
  std::string bytes;
  EXPECT_TRUE(request.SerializeToString(&bytes));
  return bytes;
}

std::string Field(int number, const std::string& value) {
  std::string out(1, static_cast<char>(number << 3 | 2));
  for (size_t n = value.size();; n >>= 7) {
    if (n < 0x80) {
      out.push_back(static_cast<char>(n));
      break;
    }
    out.push_back(static_cast<char>((n & 0x7f) | 0x80));
  }
  return out + value;
}

}  // namespace ferry::testing_util
