#include "client/testing/synthetic_program.h"

#include <algorithm>

namespace ferry::testing {
namespace {

constexpr int64_t kRows = 8;
constexpr int64_t kCols = 8;

void SetSpec(v1::Node* node) {
  v1::TensorSpec* spec = node->mutable_tensor();
  spec->set_dtype(v1::F32);
  spec->add_sizes(kRows);
  spec->add_sizes(kCols);
}

v1::Node* AddInput(v1::Method* method, const std::string& name) {
  v1::Node* node = method->add_nodes();
  node->set_name(name);
  node->mutable_input()->set_kind(v1::USER_INPUT);
  SetSpec(node);
  return node;
}

v1::Node* AddCall(v1::Method* method, const std::string& name,
                  const std::string& op,
                  std::initializer_list<std::string> operands,
                  const std::string& tag) {
  v1::Node* node = method->add_nodes();
  node->set_name(name);
  v1::CallNode* call = node->mutable_call();
  call->set_op(op);
  for (const std::string& operand : operands) {
    call->add_args()->set_value(operand);
  }
  SetSpec(node);
  if (!tag.empty()) node->set_delegation_tag(tag);
  return node;
}

}  // namespace

v1::LowerRequest SyntheticChainRequest(int64_t nodes, int variant,
                                       int ops_per_partition) {
  v1::LowerRequest request;
  v1::Method* method = request.mutable_program()->add_methods();
  method->set_name("forward_" + std::to_string(variant));
  AddInput(method, "a");
  AddInput(method, "b");
  int group_size = std::max(1, ops_per_partition) + 1;  // + the host sin
  // 2 inputs and the output, then whole groups.
  int64_t groups = std::max<int64_t>(1, (nodes - 3) / group_size);
  std::string h = "a";
  for (int64_t g = 0; g < groups; ++g) {
    std::string tag = "p" + std::to_string(g);
    for (int op = 0; op + 1 < group_size; ++op) {
      std::string name = "n" + std::to_string(g) + "_" + std::to_string(op);
      switch (op % 3) {
        case 0:
          AddCall(method, name, "aten::add.Tensor", {h, "b"}, tag);
          break;
        case 1:
          AddCall(method, name, "aten::mul.Tensor", {h, "a"}, tag);
          break;
        default:
          AddCall(method, name, "aten::relu", {h}, tag);
          break;
      }
      h = name;
    }
    std::string sin = "sin_" + std::to_string(g);
    AddCall(method, sin, "aten::sin", {h}, "");
    h = sin;
  }
  v1::Node* output = method->add_nodes();
  output->set_name("output");
  output->mutable_output()->add_values()->set_value(h);
  return request;
}

v1::LowerRequest TinyRequest(int variant) {
  v1::LowerRequest request;
  v1::Method* method = request.mutable_program()->add_methods();
  method->set_name("forward_" + std::to_string(variant));
  AddInput(method, "a");
  AddInput(method, "b");
  AddCall(method, "sum", "aten::add.Tensor", {"a", "b"}, "p0");
  AddCall(method, "out", "aten::relu", {"sum"}, "");
  v1::Node* output = method->add_nodes();
  output->set_name("output");
  output->mutable_output()->add_values()->set_value("out");
  return request;
}

}  // namespace ferry::testing
