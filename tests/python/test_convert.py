"""The converter (ferry.torch) on small modules: specs, schemas, sources,
constants, tags, and the errors for what a Ferry program cannot express."""
import os
import tempfile
import unittest

import frontend_util as util  # first: a clear failure without torch
import models
import torch

from ferry import FerryError
from ferry.proto import program_pb2 as pb
from ferry.torch import (exported_to_program, graph_to_program,
                         module_to_program, trace_make_fx)
from ferry.torch import InputInfo, USER_INPUT, PARAMETER, registry


def nodes(program):
    return {n.name: n for n in program.methods[0].nodes}


def calls(program):
    return [n for n in program.methods[0].nodes if n.WhichOneof("kind") ==
            "call"]


def check(program):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "p.binpb")
        with open(path, "wb") as f:
            f.write(program.SerializeToString())
        return util.ferry("check", path)


class ConverterTest(unittest.TestCase):

    def test_linear_relu(self):
        torch.manual_seed(0)
        m = models.LinearRelu()
        p = module_to_program(m, [torch.randn(2, 8)], frontend="make_fx")
        ops = [n.call.op for n in calls(p)]
        self.assertEqual(ops, ["aten::t", "aten::addmm", "aten::relu"])
        by_name = nodes(p)
        addmm = next(n for n in calls(p) if n.call.op == "aten::addmm")
        # addmm is registered: no schema of its own (schemas="auto").
        self.assertEqual(addmm.call.schema, "")
        self.assertEqual(list(addmm.tensor.sizes), [2, 4])
        self.assertEqual(addmm.tensor.dtype, pb.F32)
        self.assertTrue(addmm.source.file.endswith("models.py"))
        self.assertEqual(addmm.source.line, util.marker_line("linear_relu"))
        # t of the [4, 8] weight: a view with transposed strides.
        t = next(n for n in calls(p) if n.call.op == "aten::t")
        self.assertEqual(list(t.tensor.sizes), [8, 4])
        self.assertEqual(list(t.tensor.strides), [1, 8])
        # Parameters: PARAMETER inputs naming constants with their data.
        w = by_name["p_fc_weight"]
        self.assertEqual(w.input.kind, pb.PARAMETER)
        self.assertEqual(w.input.target, "fc.weight")
        const = {c.name: c for c in p.constants}
        self.assertEqual(const["fc.weight"].data,
                         m.fc.weight.detach().numpy().tobytes())
        self.assertEqual(by_name["x"].input.kind, pb.USER_INPUT)
        self.assertEqual(check(p).returncode, 0)

    def test_conv_bn_relu_tuple_and_getitem(self):
        p = module_to_program(models.ConvBnRelu(), [torch.randn(1, 3, 8, 8)],
                              frontend="make_fx")
        bn = next(n for n in calls(p) if n.call.op == "aten::native_batch_norm")
        self.assertEqual(bn.WhichOneof("result"), "tuple")
        self.assertEqual(len(bn.tuple.elements), 3)
        self.assertEqual(list(bn.tuple.elements[0].sizes), [1, 4, 8, 8])
        getitem = next(n for n in p.methods[0].nodes
                       if n.WhichOneof("kind") == "getitem")
        self.assertEqual(getitem.getitem.source, bn.name)
        self.assertEqual(getitem.getitem.index, 0)
        relu = next(n for n in calls(p) if n.call.op == "aten::relu_")
        self.assertEqual(relu.call.args[0].value, getitem.name)
        conv = next(n for n in calls(p) if n.call.op == "aten::convolution")
        # Schemas travel exactly with the operators the registry lacks.
        unknown = registry.unknown_operators(p, util.FERRY)
        for n in calls(p):
            if n.call.op in unknown:
                self.assertEqual(
                    n.call.schema,
                    str(getattr(torch.ops.aten, n.call.op.split("::")[1].split(
                        ".")[0]).__getattr__(n.call.op.split(".")[1] if "." in
                                             n.call.op else "default")._schema))
            else:
                self.assertEqual(n.call.schema, "", n.call.op)
        self.assertEqual(conv.call.args[2].WhichOneof("kind"), "none")
        self.assertEqual(list(conv.call.args[3].ints.values), [1, 1])
        kinds = {n.input.target: n.input.kind for n in p.methods[0].nodes
                 if n.WhichOneof("kind") == "input" and n.input.target}
        self.assertEqual(kinds["bn.running_mean"], pb.BUFFER)
        self.assertEqual(kinds["bn.weight"], pb.PARAMETER)
        # num_batches_tracked is never read in eval mode: left out.
        self.assertNotIn("bn.num_batches_tracked", kinds)
        self.assertEqual(check(p).returncode, 0)

    def test_inplace_relu(self):
        p = module_to_program(models.InplaceRelu(), [torch.randn(4)],
                              frontend="make_fx")
        relu = next(n for n in calls(p) if n.call.op == "aten::relu_")
        self.assertEqual(relu.call.schema, "")  # registered
        p = module_to_program(models.InplaceRelu(), [torch.randn(4)],
                              frontend="make_fx", schemas="always")
        relu = next(n for n in calls(p) if n.call.op == "aten::relu_")
        self.assertEqual(relu.call.schema,
                         "aten::relu_(Tensor(a!) self) -> Tensor(a!)")
        self.assertEqual(relu.source.line, util.marker_line("relu_"))
        out = p.methods[0].nodes[-1]
        self.assertEqual(out.output.values[0].value, relu.name)
        # x + 1: the Scalar overload of add, not a Tensor argument given 1.
        add = calls(p)[0]
        self.assertEqual(add.call.op, "aten::add.Scalar")
        self.assertEqual(add.call.args[1].int_value, 1)

    def test_view_transpose(self):
        p = module_to_program(models.ViewTranspose(), [torch.randn(24)],
                              frontend="make_fx")
        view, transpose = calls(p)
        self.assertEqual(view.call.op, "aten::view")
        self.assertEqual(list(view.call.args[1].ints.values), [4, 6])
        self.assertEqual(transpose.call.op, "aten::transpose.int")
        self.assertEqual(list(transpose.tensor.sizes), [6, 4])
        self.assertEqual(list(transpose.tensor.strides), [1, 6])

    def test_tuple_output(self):
        p = module_to_program(models.TupleOutput(),
                              [torch.randn(3), torch.randn(3)],
                              frontend="make_fx")
        out = p.methods[0].nodes[-1]
        self.assertEqual([v.value for v in out.output.values], ["add", "mul"])
        inputs = [n.name for n in p.methods[0].nodes
                  if n.WhichOneof("kind") == "input"]
        self.assertEqual(inputs, ["x", "y"])

    def test_buffers(self):
        p = module_to_program(models.WithBuffer(), [torch.randn(4)],
                              frontend="make_fx")
        scale = nodes(p)["b_scale"]
        self.assertEqual(scale.input.kind, pb.BUFFER)
        self.assertEqual(p.constants[0].data,
                         torch.full((4,), 2.0).numpy().tobytes())
        p = module_to_program(models.CountingBuffer(), [torch.randn(4)],
                              frontend="make_fx")
        self.assertEqual(nodes(p)["b_count"].input.kind, pb.MUTABLE_BUFFER)
        self.assertEqual(check(p).returncode, 0)

    def test_no_weights(self):
        p = module_to_program(models.LinearRelu(), [torch.randn(2, 8)],
                              frontend="make_fx", weights=False)
        for c in p.constants:
            self.assertFalse(c.HasField("data"))
            self.assertNotEqual(c.seed, 0)
        self.assertEqual(list(p.constants[0].spec.sizes), [4, 8])

    def test_int64_input(self):
        p = module_to_program(models.TokenEmbedding(),
                              [torch.randint(0, 10, (2, 6))],
                              frontend="make_fx")
        self.assertEqual(nodes(p)["ids"].tensor.dtype, pb.I64)
        emb = calls(p)[0]
        self.assertEqual(emb.call.op, "aten::embedding")
        self.assertEqual(list(emb.tensor.sizes), [2, 6, 4])

    def test_delegation_tags(self):
        from torch.fx.experimental.proxy_tensor import make_fx

        def f(x, y):
            return torch.sin(x + y)

        gm = make_fx(f, tracing_mode="fake")(torch.randn(4), torch.randn(4))
        for n in gm.graph.nodes:
            if n.op == "call_function" and "add" in str(n.target):
                n.meta["delegation_tag"] = "d0"
        p = graph_to_program(gm, [InputInfo(USER_INPUT, "x"),
                                  InputInfo(USER_INPUT, "y")])
        # Registered operators keep no schema of their own (a node with one
        # is a custom operator, never delegated).
        self.assertEqual(registry.unknown_operators(p, util.FERRY), set())
        registry.keep_schemas_of(p, set())
        by_op = {n.call.op: n for n in calls(p)}
        self.assertEqual(by_op["aten::add.Tensor"].delegation_tag, "d0")
        self.assertEqual(by_op["aten::sin"].delegation_tag, "")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "p.binpb")
            with open(path, "wb") as f:
                f.write(p.SerializeToString())
            done = util.ferry("lower", "-o", os.path.join(tmp, "l.binpb"),
                              path)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("delegates: 1", done.stderr)

    def test_tied_weights_are_one_constant(self):
        p = module_to_program(models.TiedWeights(),
                              [torch.randint(0, 10, (2, 3))],
                              frontend="make_fx")
        self.assertEqual([c.name for c in p.constants], ["emb.weight"])
        params = [n for n in p.methods[0].nodes
                  if n.WhichOneof("kind") == "input" and
                  n.input.kind == pb.PARAMETER]
        self.assertEqual(len(params), 1)
        readers = [n.call.op for n in calls(p)
                   if any(a.value == params[0].name for a in n.call.args)]
        self.assertEqual(sorted(readers), ["aten::embedding", "aten::t"])

    def test_exported_program_signature(self):
        """The torch.export path's use of the graph signature, on an
        ExportedProgram-shaped object (this torch has no torch.export): a
        parameter, a buffer, a lifted constant and a mutated buffer, whose
        new value is written back with copy_."""
        from types import SimpleNamespace as NS
        from torch.fx.experimental.proxy_tensor import make_fx

        def f(w, buf, c, x):
            return buf + 1, x * w + c

        w, buf, c = torch.randn(4), torch.zeros(4), torch.ones(4)
        gm = make_fx(f, tracing_mode="fake")(w, buf, c, torch.randn(4))
        ph = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        out = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]

        def spec(kind, name, target=None):
            return NS(kind=NS(name=kind), arg=NS(name=name), target=target)

        sig = NS(input_specs=[spec("PARAMETER", ph[0], "w"),
                              spec("BUFFER", ph[1], "buf"),
                              spec("CONSTANT_TENSOR", ph[2], "c"),
                              spec("USER_INPUT", ph[3])],
                 output_specs=[spec("BUFFER_MUTATION", out[0].name, "buf"),
                               spec("USER_OUTPUT", out[1].name)])
        ep = NS(graph_module=gm, graph_signature=sig,
                state_dict={"w": w, "buf": buf}, constants={"c": c})
        p = exported_to_program(ep, decompose=False)
        by_name = nodes(p)
        kinds = [by_name[n].input.kind for n in ph]
        self.assertEqual(kinds, [pb.PARAMETER, pb.MUTABLE_BUFFER,
                                 pb.LIFTED_CONSTANT, pb.USER_INPUT])
        copy = next(n for n in calls(p) if n.call.op == "aten::copy_")
        self.assertEqual(copy.call.args[0].value, ph[1])
        self.assertEqual(copy.call.args[1].value, out[0].name)
        output = p.methods[0].nodes[-1]
        self.assertEqual([v.value for v in output.output.values],
                         [out[1].name])
        self.assertEqual(sorted(c.name for c in p.constants),
                         ["buf", "c", "w"])
        self.assertEqual(check(p).returncode, 0, check(p).stdout)

    def test_exported_program_user_input_mutation(self):
        from types import SimpleNamespace as NS
        from torch.fx.experimental.proxy_tensor import make_fx

        def f(x):
            return x + 1, x * 2

        gm = make_fx(f, tracing_mode="fake")(torch.randn(4))
        x = next(n.name for n in gm.graph.nodes if n.op == "placeholder")
        out = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]

        def spec(kind, name, target=None):
            return NS(kind=NS(name=kind), arg=NS(name=name), target=target)

        sig = NS(input_specs=[spec("USER_INPUT", x)],
                 output_specs=[spec("USER_INPUT_MUTATION", out[0].name, x),
                               spec("USER_OUTPUT", out[1].name)])
        ep = NS(graph_module=gm, graph_signature=sig, state_dict={},
                constants={})
        p = exported_to_program(ep, decompose=False)
        copy = next(n for n in calls(p) if n.call.op == "aten::copy_")
        self.assertEqual([a.value for a in copy.call.args], [x, out[0].name])
        self.assertEqual(
            [v.value for v in p.methods[0].nodes[-1].output.values],
            [out[1].name])
        self.assertEqual(check(p).returncode, 0)

    # --- What a Ferry program cannot express

    def test_dynamic_shape_is_an_error_naming_the_node(self):
        with self.assertRaises(FerryError) as e:
            trace_make_fx(models.LinearRelu(), [torch.randn(2, 8)],
                          dynamic=True)
        self.assertIn("dynamic shape", str(e.exception))
        self.assertIn("node '", str(e.exception))
        self.assertEqual(e.exception.exit_code, 1)

    def test_quantized_is_an_error_naming_the_node(self):
        with self.assertRaises(FerryError) as e:
            module_to_program(models.Quantized(), [torch.randn(4)],
                              frontend="make_fx")
        self.assertIn("quantize_per_tensor", str(e.exception))
        self.assertIn("quantized", str(e.exception))
        self.assertIn("models.py:", str(e.exception))

    def test_sparse_is_an_error(self):
        with self.assertRaises(FerryError) as e:
            module_to_program(models.Sparse(), [torch.randn(4, 4)],
                              frontend="make_fx")
        self.assertIn("sparse", str(e.exception))

    def test_quantized_parameter_input(self):
        with self.assertRaises(FerryError) as e:
            graph_to_program(
                torch.fx.symbolic_trace(models.InplaceRelu()),
                [InputInfo(PARAMETER, "q", "q",
                           torch.quantize_per_tensor(torch.randn(4), 0.1, 0,
                                                     torch.quint8))])
        self.assertIn("quantized", str(e.exception))

    def test_torch_export_where_missing(self):
        if hasattr(torch, "export"):
            self.skipTest("this torch has torch.export (tested on the GPU "
                          "machine)")
        with self.assertRaises(FerryError) as e:
            module_to_program(models.LinearRelu(), [torch.randn(2, 8)],
                              frontend="export")
        self.assertIn("torch.export is not available", str(e.exception))
        self.assertEqual(e.exception.exit_code, 2)


if __name__ == "__main__":
    unittest.main()
