#include "bench/block_program.h"

#include <initializer_list>
#include <string>

#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

void SetSpec(v1::TensorSpec* spec) {
  spec->set_dtype(v1::F32);
  spec->add_sizes(16);
  spec->add_sizes(16);
}

v1::Node* AddCall(v1::Method* m, const std::string& name, const char* op,
                  std::initializer_list<std::string> args) {
  v1::Node* n = m->add_nodes();
  n->set_name(name);
  n->mutable_call()->set_op(op);
  for (const std::string& a : args) n->mutable_call()->add_args()->set_value(a);
  SetSpec(n->mutable_tensor());
  return n;
}

}  // namespace

v1::LowerRequest MakeBlockProgram(int64_t target) {
  v1::LowerRequest request;
  v1::Program* program = request.mutable_program();
  for (int k = 0; k < 3; ++k) {
    v1::LoweredModule* mod = program->add_modules();
    mod->set_id(absl::StrCat("add_cuda", k));
    mod->set_backend("FerryCudaBackend");
    v1::CompileSpec* cs = mod->add_compile_specs();
    cs->set_key("target_device");
    cs->set_value(absl::StrCat("cuda:", k));
    v1::Method* g = mod->mutable_graph();
    g->set_name(mod->id());
    for (const char* in : {"x", "y"}) {
      v1::Node* n = g->add_nodes();
      n->set_name(in);
      n->mutable_input()->set_kind(v1::USER_INPUT);
      SetSpec(n->mutable_tensor());
      SetSpec(mod->add_input_layouts());
    }
    AddCall(g, "z", "aten::add.Tensor", {"x", "y"});
    g->add_nodes()->set_name("out");
    g->mutable_nodes(3)->mutable_output()->add_values()->set_value("z");
    mod->set_returns_tuple(true);
  }
  v1::Method* m = program->add_methods();
  m->set_name("forward");
  v1::Node* in = m->add_nodes();
  in->set_name("x");
  in->mutable_input()->set_kind(v1::USER_INPUT);
  SetSpec(in->mutable_tensor());
  std::string prev = "x";
  auto delegate = [&](const std::string& name, int device, const std::string& a,
                      const std::string& b) {
    v1::Node* d = m->add_nodes();
    d->set_name(name);
    d->mutable_delegate()->set_module(absl::StrCat("add_cuda", device));
    d->mutable_delegate()->add_args()->set_value(a);
    d->mutable_delegate()->add_args()->set_value(b);
    SetSpec(d->mutable_tuple()->add_elements());
    v1::Node* gi = m->add_nodes();
    gi->set_name(name + "_0");
    gi->mutable_getitem()->set_source(name);
    SetSpec(gi->mutable_tensor());
    return name + "_0";
  };
  for (int64_t block = 0; m->nodes_size() + 9 <= target; ++block) {
    const std::string id = absl::StrCat(block);
    const int device = static_cast<int>(block % 3);
    AddCall(m, "h" + id, "aten::sin", {prev});
    AddCall(m, "i" + id, "aten::cos", {prev});
    std::string g = delegate("d" + id, device, "h" + id, "i" + id);
    std::string f = delegate("e" + id, device, g, prev);
    AddCall(m, "r" + id, "aten::relu_", {g});
    AddCall(m, "s" + id, "aten::add.Tensor", {f, g});
    prev = "s" + id;
  }
  v1::Node* out = m->add_nodes();
  out->set_name("output");
  out->mutable_output()->add_values()->set_value(prev);
  return request;
}

}  // namespace ferry
