#!/usr/bin/env python3
"""Writes the request.textproto of every conformance case (CASES.md).

A developer tool: the requests are checked in, and the golden outputs next to
them are produced by `ferry_conformance_test --update` and then reviewed by a
person. Run from the repository root:  python3 tests/conformance/make_cases.py
Each request starts with its intent (what a naive pass gets wrong) and an
`# expect:` line with the counts CASES.md gives; the test checks them.
"""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)))


def spec(dtype="F32", sizes=(4, 4), strides=None, indent=""):
    s = f"dtype: {dtype}"
    for v in sizes:
        s += f" sizes: {v}"
    if strides is not None:
        for v in strides:
            s += f" strides: {v}"
    return s


class Method:
    def __init__(self, name):
        self.name = name
        self.nodes = []

    def _node(self, name, body, result=None, tag=None):
        s = f'    nodes {{\n      name: "{name}"\n      {body}\n'
        if result is not None:
            s += f"      tensor {{ {result} }}\n"
        if tag:
            s += f'      delegation_tag: "{tag}"\n'
        s += "    }\n"
        self.nodes.append(s)
        return name

    def input(self, name, dtype="F32", sizes=(4, 4), strides=None, kind="USER_INPUT", target=None):
        body = f"input {{ kind: {kind}" + (f' target: "{target}"' if target else "") + " }"
        return self._node(name, body, spec(dtype, sizes, strides))

    def call(self, name, op, args, dtype="F32", sizes=(4, 4), strides=None, tag=None, result=True):
        a = " ".join(args)
        body = f'call {{ op: "{op}" {a} }}'
        return self._node(name, body, spec(dtype, sizes, strides) if result else None, tag)

    def scalar_call(self, name, op, args):
        a = " ".join(args)
        s = f'    nodes {{\n      name: "{name}"\n      call {{ op: "{op}" {a} }}\n      scalar: SCALAR_INT\n    }}\n'
        self.nodes.append(s)
        return name

    def delegate(self, name, module, args, results, bare=False):
        a = " ".join(f'args {{ value: "{x}" }}' for x in args)
        s = f'    nodes {{\n      name: "{name}"\n      delegate {{ module: "{module}" {a} }}\n'
        if bare:
            s += f"      tensor {{ {results[0]} }}\n"
        else:
            s += "      tuple {" + "".join(f" elements {{ {r} }}" for r in results) + " }\n"
        s += "    }\n"
        self.nodes.append(s)
        return name

    def getitem(self, name, source, index, dtype="F32", sizes=(4, 4)):
        return self._node(name, f'getitem {{ source: "{source}" index: {index} }}', spec(dtype, sizes))

    def output(self, *values):
        v = " ".join(f'values {{ value: "{x}" }}' for x in values)
        self.nodes.append(f'    nodes {{\n      name: "output"\n      output {{ {v} }}\n    }}\n')

    def text(self):
        return f'  methods {{\n    name: "{self.name}"\n' + "".join(self.nodes) + "  }\n"


def v(x):
    return f'args {{ value: "{x}" }}'


def ints(name, values):
    return f'args {{ name: "{name}" ints {{' + "".join(f" values: {x}" for x in values) + " } }"


def i(x):
    return f"args {{ int_value: {x} }}"


def add(m, name, a, b, tag=None, dtype="F32", sizes=(4, 4)):
    return m.call(name, "aten::add.Tensor", [v(a), v(b)], dtype=dtype, sizes=sizes, tag=tag)


def unary(m, name, op, a, tag=None):
    return m.call(name, op, [v(a)], tag=tag)


def escape_bytes(data):
    return "".join(f"\\{b:03o}" for b in data)


class Module:
    """An already-lowered module: graph over user inputs, one op per line."""

    def __init__(self, mid, target, inputs, returns_tuple=True, layouts=None):
        self.mid = mid
        self.target = target
        self.graph = Method(mid)
        self.inputs = inputs
        self.returns_tuple = returns_tuple
        self.layouts = layouts or [spec() for _ in inputs]
        for name, lay in zip(inputs, self.layouts):
            self.graph._node(name, "input { kind: USER_INPUT }", lay)

    def text(self):
        s = f'  modules {{\n    id: "{self.mid}"\n    backend: "FerryCudaBackend"\n'
        if self.target is not None:
            s += f'    compile_specs {{ key: "target_device" value: "{self.target}" }}\n'
        s += "    graph {\n" + self.graph.text().replace("  methods {\n", "", 1).rsplit("  }\n", 1)[0]
        s += "    }\n"
        for lay in self.layouts:
            s += f"    input_layouts {{ {lay} }}\n"
        if self.returns_tuple:
            s += "    returns_tuple: true\n"
        s += "  }\n"
        return s


def request(methods, options="", constants="", modules=()):
    s = "program {\n" + "".join(m.text() for m in methods)
    s += constants
    s += "".join(mod.text() for mod in modules)
    s += "}\n"
    if options:
        s += "options {\n" + options + "}\n"
    return s


def tag_targets(**tags):
    s = "  partitioner {\n"
    for tag, dev in tags.items():
        s += f'    tag_targets {{ key: "{tag}" value: "{dev}" }}\n'
    return s + "  }\n"


SKIP_IN = "  skip_h2d_for_method_inputs { default_value: true }\n"
SKIP_OUT = "  skip_d2h_for_method_outputs { default_value: true }\n"
STRICT = "  error_on_per_call_copies: true\n"

CASES = {}


def case(cid, intent, expect, text):
    CASES[cid] = (intent, expect, text)


def inputs(m, *names, **kw):
    for n in names:
        m.input(n, **kw)


# ---------------------------------------------------------------- A. Baseline
def a1(opts="", cid="A1_single_delegate", intent=None, expect="h2d=2 d2h=1 delegates=1", target="cuda:0"):
    m = Method("forward")
    inputs(m, "a", "b")
    add(m, "t", "a", "b", tag="d0")
    m.output("t")
    case(cid, intent or "one delegate on cuda:0: both inputs go over once, the result comes back once",
         expect, request([m], tag_targets(d0=target) + opts))


a1()
mod = Module("host_add", None, ["x", "y"])
mod.graph.call("s", "aten::add.Tensor", [v("x"), v("y")]); mod.graph.output("s")
m = Method("forward"); inputs(m, "a", "b"); m.delegate("d", "host_add", ["a", "b"], [spec()]); m.getitem("t", "d", 0)
m.output("t")
case("A2_no_target_delegate", "a delegate with no target_device runs on the host: nothing is copied",
     "h2d=0 d2h=0 delegates=1", request([m], modules=[mod]))
a1("  enable_non_cpu_memory_planning: false\n", "A3_planning_disabled",
   "with device memory planning off, placements are recorded but nothing is copied; one host arena",
   "h2d=0 d2h=0 delegates=1")

m = Method("forward"); inputs(m, "a", "b", "c")
add(m, "t", "a", "b", tag="d0"); add(m, "u", "t", "c", tag="d1"); m.output("u")
case("A4_same_device_chain", "D1 reads t where it is, on cuda:0: no D2H->H2D round trip",
     "h2d=3 d2h=1 delegates=2", request([m], tag_targets(d0="cuda:0", d1="cuda:0")))
case("A5_cross_device_chain", "t reaches cuda:1 through the host: one D2H and one H2D",
     "h2d=4 d2h=2 delegates=2", request([m], tag_targets(d0="cuda:0", d1="cuda:1")))

m = Method("forward"); inputs(m, "a", "b")
add(m, "t", "a", "b", tag="d0"); add(m, "u", "t", "a", tag="d1"); add(m, "w", "t", "b", tag="d2")
add(m, "r", "u", "w", tag="d3"); m.output("r")
case("A6_shared_inputs", "a and b are read by several delegates on cuda:0 and copied there once each "
     "(upstream copies per delegate argument: 4 H2D); no H2D is fed by a D2H",
     "h2d=2 d2h=1 delegates=4", request([m], tag_targets(d0="cuda:0", d1="cuda:0", d2="cuda:0", d3="cuda:0")))

m = Method("forward"); inputs(m, "a", "b")
add(m, "t", "a", "b", tag="d0"); add(m, "u", "t", "a", tag="d1"); unary(m, "w", "aten::relu", "t"); m.output("u", "w")
case("A7_device_and_host_readers", "D1 reads t on the device; one D2H of t feeds the host relu",
     "h2d=2 d2h=2 delegates=2", request([m], tag_targets(d0="cuda:0", d1="cuda:0")))

m = Method("forward"); inputs(m, "a", "b")
add(m, "t", "a", "b", tag="d0"); add(m, "u", "t", "a", tag="d1"); add(m, "w", "t", "b", tag="d2"); m.output("u", "w")
case("A8_two_devices_fanout", "exactly one H2D is fed by a D2H (t to cuda:1); D1 reads t directly",
     "h2d=4 d2h=3 delegates=3", request([m], tag_targets(d0="cuda:0", d1="cuda:0", d2="cuda:1")))

m = Method("forward"); inputs(m, "a", "b"); add(m, "t", "a", "b", tag="d0"); m.output("t")
case("A9_device_index_1", "every device value carries index 1, and the arena is cuda:1's",
     "h2d=2 d2h=1 delegates=1", request([m], tag_targets(d0="cuda:1")))

m = Method("forward"); inputs(m, "a", "b"); add(m, "t", "a", "b", tag="d0"); unary(m, "s", "aten::sin", "t"); m.output("s")
case("A10_host_op_on_result", "sin runs on the host and reads the one D2H of t",
     "h2d=2 d2h=1 delegates=1", request([m], tag_targets(d0="cuda:0")))

a1(SKIP_IN, "A11_skip_inputs", "skip_h2d: a and b are supplied on cuda:0; no H2D", "h2d=0 d2h=1 delegates=1")
a1(SKIP_OUT, "A12_skip_outputs", "skip_d2h: the returned value stays on cuda:0", "h2d=2 d2h=0 delegates=1")
a1(SKIP_IN + SKIP_OUT, "A13_skip_both", "both skips: no copies; inputs and output are cuda:0 values planned "
   "in the cuda:0 arena", "h2d=0 d2h=0 delegates=1")

m = Method("forward"); inputs(m, "a", "b"); unary(m, "s", "aten::sin", "a"); add(m, "t", "s", "b", tag="d0"); m.output("t")
case("A14_skip_inputs_host_producer", "skip_h2d: b is a cuda:0 input; a only feeds a host op and stays a host input; "
     "sin(a) gets the one H2D", "h2d=1 d2h=1 delegates=1", request([m], tag_targets(d0="cuda:0") + SKIP_IN))

# A15: target_device spellings, on already-lowered modules.
mods, m = [], Method("forward")
inputs(m, "a", "b")
outs = []
for k, target in enumerate(["cuda:0", "cuda:1", "cpu", "CUDA:0", "Cuda:2"]):
    mod = Module(f"m{k}", target, ["x", "y"])
    mod.graph.call("s", "aten::add.Tensor", [v("x"), v("y")])
    mod.graph.output("s")
    mods.append(mod)
    m.delegate(f"d{k}", f"m{k}", ["a", "b"], [spec()])
    m.getitem(f"t{k}", f"d{k}", 0)
    outs.append(f"t{k}")
m.output(*outs)
case("A15_target_device_accepted", "cuda:0, cuda:1, cpu, CUDA:0 and Cuda:2 parse (type case-insensitive, "
     "index default 0); the cpu delegate gets no copies", "h2d=6 d2h=4 delegates=5", request([m], modules=mods))
mods, m = [], Method("forward")
inputs(m, "a", "b")
outs = []
for k, target in enumerate(["tpu:0", "cuda:x", "cuda:-1", "cuda:"]):
    mod = Module(f"m{k}", target, ["x", "y"])
    mod.graph.call("s", "aten::add.Tensor", [v("x"), v("y")])
    mod.graph.output("s")
    mods.append(mod)
    m.delegate(f"d{k}", f"m{k}", ["a", "b"], [spec()])
    m.getitem(f"t{k}", f"d{k}", 0)
    outs.append(f"t{k}")
m.output(*outs)
case("A15_target_device_rejected", "tpu:0, cuda:x, cuda:-1 and cuda: are errors naming each delegate",
     "error", request([m], modules=mods))

a1(SKIP_IN + SKIP_OUT + "  alloc_graph_input: false\n  alloc_graph_output: false\n", "A16_unallocated_graph_io",
   "with alloc_graph_input/output off, inputs and outputs get no arena offset (A13 shows them planned)",
   "h2d=0 d2h=0 delegates=1")

methods = []
for dname, dtype, sizes, op in [("f16", "F16", (4, 4), "aten::add.Tensor"), ("i32", "I32", (4, 4), "aten::add.Tensor"),
                                ("i64", "I64", (4, 4), "aten::add.Tensor"), ("bool", "BOOL", (4, 4), "aten::mul.Tensor"),
                                ("scalar", "F32", (), "aten::add.Tensor"), ("empty", "F32", (0, 3), "aten::add.Tensor")]:
    m = Method(f"forward_{dname}")
    m.input("a", dtype=dtype, sizes=sizes); m.input("b", dtype=dtype, sizes=sizes)
    m.call("t", op, [v("a"), v("b")], dtype=dtype, sizes=sizes, tag="d0")
    m.output("t")
    methods.append(m)
case("A17_dtypes_and_shapes", "copies keep dtype, sizes and strides for f16, i32, i64, bool, a 0-dim and an "
     "empty [0,3] tensor (2 H2D / 1 D2H per method)", "h2d=12 d2h=6 delegates=6",
     request(methods, tag_targets(d0="cuda:0")))

# ------------------------------------------------------------ B. The defects
w_data = struct.pack("<12f", *[float(k + 1) for k in range(12)])  # stored order
m = Method("forward")
m.input("x", sizes=(4, 4))
m.input("w", sizes=(4, 3), strides=(1, 4), kind="PARAMETER", target="w")
m.nodes[-1] = m.nodes[-1].replace('      input {', '      input {').replace("    }\n", '      delegation_tag: "d0"\n    }\n')
m.call("y", "aten::mm", [v("x"), v("w")], sizes=(4, 3), tag="d0")
m.output("y")
const = (f'  constants {{\n    name: "w"\n    spec {{ {spec("F32", (4, 3), (1, 4))} }}\n'
         f'    data: "{escape_bytes(w_data)}"\n  }}\n')
case("B1_transposed_parameter", "w is stored transposed; a naive pipeline compiles the delegate for the stored "
     "strides while the data is emitted contiguous (wrong numbers). normalize_layout makes w contiguous (data "
     "permuted) before partitioning, with one warning naming w; the module owns w", "h2d=1 d2h=1 delegates=1",
     request([m], tag_targets(d0="cuda:0"), constants=const))

m = Method("forward")
m.input("x", sizes=(1, 2, 3, 4))
m.input("w", sizes=(1, 2, 3, 4), strides=(24, 1, 8, 2), kind="PARAMETER", target="w")
m.nodes[-1] = m.nodes[-1].replace("    }\n", '      delegation_tag: "d0"\n    }\n')
m.call("y", "aten::mul.Tensor", [v("x"), v("w")], sizes=(1, 2, 3, 4), tag="d0")
m.output("y")
const = f'  constants {{\n    name: "w"\n    spec {{ {spec("F32", (1, 2, 3, 4), (24, 1, 8, 2))} }}\n    seed: 7\n  }}\n'
case("B1b_channels_last_parameter", "a channels-last parameter is left as it is, with no layout warning",
     "h2d=1 d2h=1 delegates=1", request([m], tag_targets(d0="cuda:0"), constants=const))


def b2(view=False):
    m = Method("forward"); inputs(m, "a", "b", "c")
    add(m, "t", "a", "b", tag="d0")
    if view:
        m.call("v", "aten::view", [v("t"), ints("size", [16])], sizes=(16,))
        m.call("r", "aten::relu_", [v("v")], sizes=(16,))
    else:
        m.call("r", "aten::relu_", [v("t")])
    add(m, "u", "t", "c", tag="d1")
    m.output("u")
    return m


case("B2_host_inplace_between_delegates", "the host relu_ writes the host copy of t; upstream elides "
     "H2D(D2H(t)) and D1 reads the stale device t. Here a fresh H2D after the relu_ feeds D1",
     "h2d=4 d2h=2 delegates=2", request([b2()], tag_targets(d0="cuda:0", d1="cuda:0")))
case("B2b_host_inplace_through_view", "as B2, the write goes through a view of the host copy: still a fresh "
     "H2D after it", "h2d=4 d2h=2 delegates=2", request([b2(True)], tag_targets(d0="cuda:0", d1="cuda:0")))
m = Method("forward"); inputs(m, "a", "b", "c")
add(m, "t", "a", "b", tag="d0"); unary(m, "r", "aten::relu", "t"); add(m, "u", "t", "c", tag="d1"); m.output("u", "r")
case("B2c_host_read_between_delegates", "a host read (no write) between two cuda:0 delegates: D1 still reads t "
     "on the device (upstream gets this right; the B2 fix must not add a round trip here)", "h2d=3 d2h=2 delegates=2", request([m], tag_targets(d0="cuda:0", d1="cuda:0")))

mod = Module("relu_module", "cuda:0", ["x"], returns_tuple=False)
mod.graph.call("r", "aten::relu", [v("x")]); mod.graph.output("r")
m = Method("forward"); m.input("x"); m.delegate("d", "relu_module", ["x"], [spec()], bare=True); m.output("d")
case("B3_bare_delegate_result", "the module returns one bare tensor (no tuple, no getitem): upstream inserts "
     "no D2H and returns device memory; here the output reads the D2H", "h2d=1 d2h=1 delegates=1",
     request([m], modules=[mod]))

m = Method("forward"); inputs(m, "a", "b"); add(m, "t", "a", "b", tag="d0"); unary(m, "r", "aten::relu", "t"); m.output("t", "r")
case("B4_skip_outputs_with_host_reader", "skip_d2h with another reader: upstream rewires every use to the D2H "
     "and returns t from the host; here output 0 is t on cuda:0 and relu reads the one D2H",
     "h2d=2 d2h=1 delegates=1", request([m], tag_targets(d0="cuda:0") + SKIP_OUT))


def b4b():
    m = Method("forward"); inputs(m, "a", "b"); add(m, "t", "a", "b", tag="d0")
    m.call("r", "aten::relu_", [v("t")]); m.output("t")
    return m


case("B4b_skip_outputs_host_write", "skip_d2h but a host relu_ writes the output: it is returned from the host "
     "copy after the write, with a per-call-copy warning", "h2d=2 d2h=1 delegates=1",
     request([b4b()], tag_targets(d0="cuda:0") + SKIP_OUT))
case("B4b_strict_error", "B4b with error_on_per_call_copies: the warning becomes an error", "error",
     request([b4b()], tag_targets(d0="cuda:0") + SKIP_OUT + STRICT))


def b5(w_layout=None, module_layout=None, method="forward"):
    lay = spec("F32", (4, 4), w_layout)
    mod = Module(f"{method}_add_w", "cuda:0", ["x", "w"], layouts=[spec(), spec("F32", (4, 4), module_layout)])
    mod.graph.call("y", "aten::add.Tensor", [v("x"), v("w")]); mod.graph.output("y")
    m = Method(method); m.input("x"); m.input("w", strides=w_layout, kind="PARAMETER", target="w")
    m.delegate("d", mod.mid, ["x", "w"], [spec()]); m.getitem("y", "d", 0); m.output("y")
    const = f'  constants {{\n    name: "w"\n    spec {{ {lay} }}\n    seed: 5\n  }}\n'
    return m, mod, const


m, mod, const = b5()
case("B5_parameter_as_delegate_input", "w reaches an already-lowered delegate as an input: upstream's H2D clone "
     "stays const and emission fails; here H2D(w) is an ordinary planned cuda:0 value, w stays a host constant, "
     "with one per-call-copy warning", "h2d=2 d2h=1 delegates=1", request([m], constants=const, modules=[mod]))
case("B5b_parameter_skip_inputs", "with skip_h2d, x is a cuda:0 input but w is never relabelled as device: it "
     "still gets its H2D and the warning", "h2d=1 d2h=1 delegates=1",
     request([m], SKIP_IN, constants=const, modules=[mod]))
case("B5b_strict_error", "B5b with error_on_per_call_copies: the constant's per-call copy is an error", "error",
     request([m], SKIP_IN + STRICT, constants=const, modules=[mod]))
case("D1_constant_at_load", "B5 with constant_staging=AT_LOAD: w's copy is made once at load, no warning",
     "h2d=1 d2h=1 load=1 delegates=1", request([m], "  constant_staging: AT_LOAD\n", constants=const, modules=[mod]))
m, mod, const = b5(w_layout=(1, 4), module_layout=(1, 4))
case("B5c_permuted_parameter_refused", "w is permuted and read by a delegate compiled for that layout, so "
     "normalize_layout leaves it alone; its per-call raw copy to the device is refused, naming w", "error",
     request([m], constants=const, modules=[mod]))


def b6():
    m = Method("forward"); inputs(m, "x", "y"); add(m, "t", "x", "y", tag="d0"); unary(m, "s", "aten::sin", "x")
    m.output("t", "s")
    return m


case("B6_skip_inputs_host_reader", "skip_h2d with a second, host reader of x: upstream raises (one user "
     "only); here x lives on cuda:0 and sin reads one D2H of x, with a warning", "h2d=0 d2h=2 delegates=1",
     request([b6()], tag_targets(d0="cuda:0") + SKIP_IN))
case("B6_strict_error", "B6 with error_on_per_call_copies: an error", "error",
     request([b6()], tag_targets(d0="cuda:0") + SKIP_IN + STRICT))
m = Method("forward"); inputs(m, "x", "y"); m.scalar_call("n", "aten::sym_size.int", [v("x"), i(0)])
add(m, "t", "x", "y", tag="d0"); m.output("t", "n")
case("B6b_metadata_reader", "sym_size reads x's metadata in place: x is never copied (upstream raises: "
     "with skip_h2d it requires x to have exactly one user)", "h2d=0 d2h=1 delegates=1",
     request([m], tag_targets(d0="cuda:0") + SKIP_IN))
m = Method("forward"); inputs(m, "x", "y")
m.call("x1", "aten::add_.Scalar", ["args { value: \"x\" }", "args { float_value: 1 }"])
add(m, "t", "x", "y", tag="d0"); m.output("t")
case("B6c_input_written_on_host", "skip_h2d input x is written in place on the host: refused (upstream relabels x "
     "as device memory and the host add_ writes device memory)", "error",
     request([m], tag_targets(d0="cuda:0") + SKIP_IN))
m = Method("forward"); inputs(m, "x", "y"); add(m, "t", "x", "y", tag="d0"); m.call("u", "aten::mul.Tensor", [v("x"), v("y")], tag="d1")
m.output("t", "u")
case("B6d_skip_inputs_two_devices", "x and y live on cuda:0 (their first device reader); D1 on cuda:1 reads them "
     "through one D2H each and an H2D to cuda:1, with warnings (upstream raises: two users)", "h2d=2 d2h=4 delegates=2",
     request([m], tag_targets(d0="cuda:0", d1="cuda:1") + SKIP_IN))
a1("", "B7_cpu_target",
   "a cpu target is the host: upstream inserts copies whose kernels reject cpu at run time; here none",
   "h2d=0 d2h=0 delegates=1", target="cpu")
m = Method("forward"); inputs(m, "a", "b"); add(m, "t", "a", "b", tag="d0"); m.output("t")
case("B7_cpu_target_skips", "B7 with skip_h2d and skip_d2h: still no copies, every value on cpu (upstream "
     "relabels a and b as device inputs of a cpu 'device')",
     "h2d=0 d2h=0 delegates=1", request([m], tag_targets(d0="cpu") + SKIP_IN + SKIP_OUT))

# ---------------------------------------------------------------- C. Also
m = Method("forward"); inputs(m, "a")
add(m, "t", "a", "a", tag="d0"); add(m, "u", "t", "a", tag="d1"); add(m, "w", "u", "a", tag="d2"); m.output("w")
case("C1_copy_once", "a is read twice by one delegate and by three delegates on cuda:0: one H2D",
     "h2d=1 d2h=1 delegates=3", request([m], tag_targets(d0="cuda:0", d1="cuda:0", d2="cuda:0")))
m = Method("forward"); inputs(m, "a")
unary(m, "x", "aten::sin", "a"); unary(m, "u", "aten::exp", "x", tag="d0"); m.call("r", "aten::relu_", [v("x")])
unary(m, "z", "aten::cos", "x", tag="d1"); m.output("u", "z")
case("C2_copy_after_host_write", "x is copied to cuda:0 for D0, written by a host relu_, then copied again for D1",
     "h2d=2 d2h=2 delegates=2", request([m], tag_targets(d0="cuda:0", d1="cuda:0")))
mb4 = b4b(); mb4.name = "b4b"
mb5, mod5, const5 = b5(method="b5")
mb6 = b6(); mb6.name = "b6"
case("C3_strict_without_skip_flags", "error_on_per_call_copies without the skip flags: B4b and B6 have nothing "
     "to report, B5's constant copy stays a warning", "h2d=6 d2h=3 delegates=3",
     request([mb4, mb5, mb6], tag_targets(d0="cuda:0") + STRICT, constants=const5, modules=[mod5]))

# ------------------------------------------------------- E. Invalid requests
m = Method("forward"); inputs(m, "a", "b")
add(m, "t", "a", "b", tag="d0"); unary(m, "s", "aten::sin", "t"); m.call("u", "aten::mul.Tensor", [v("s"), v("t")], tag="d0")
m.output("u")
case("E01_partition_cycle", "d0 -> sin -> d0: the partition is not convex", "error",
     request([m], tag_targets(d0="cuda:0")))
m = Method("forward"); inputs(m, "a"); unary(m, "t", "aten::frobnicate", "a"); m.output("t")
case("E02_unknown_operator", "an operator the registry does not know, without a schema", "error", request([m]))
m = Method("forward"); inputs(m, "a"); unary(m, "t", "aten::sin", "nowhere"); m.output("t")
case("E03_dangling_reference", "a reference to a value that does not exist", "error", request([m]))
a1(SKIP_IN + "  enable_non_cpu_memory_planning: false\n", "E04_skip_without_planning",
   "skip options need device memory planning", "error")
a1("", "E05_bad_tag_target", "a partition target that is not a device", "error", target="tpu:0")
m = Method("forward"); inputs(m, "a"); unary(m, "s", "aten::sin", "t"); unary(m, "t", "aten::cos", "a"); m.output("s")
case("E06_not_topological", "a node reads a value defined after it", "error", request([m]))
m = Method("forward"); m.input("a", sizes=(4, 4)); m.input("b", sizes=(3, 4)); m.call("t", "aten::mm", [v("a"), v("b")]); m.output("t")
case("E07_shape_mismatch", "mm of [4,4] and [3,4]", "error", request([m]))
m = Method("forward"); inputs(m, "a"); unary(m, "t", "aten::sin", "a")
case("E08_missing_output", "a method without an output node", "error", request([m]))
m = Method("forward"); inputs(m, "a", "b"); add(m, "t", "a", "b", tag="d0")
m.output("t")
text = request([m], tag_targets(d0="cuda:0"))
case("E09_inplace_partition_input", "a tagged relu_ would make the delegate write its own input", "error",
     request([(lambda mm: (inputs(mm, "a"), mm.call("r", "aten::relu_", [v("a")], tag="d0"), mm.output("r"), mm)[-1])(Method("forward"))],
             tag_targets(d0="cuda:0")))


def main():
    for cid, (intent, expect, text) in sorted(CASES.items()):
        d = os.path.join(ROOT, cid)
        os.makedirs(d, exist_ok=True)
        header = f"# {cid}: {intent}.\n# expect: {expect}\n"
        with open(os.path.join(d, "request.textproto"), "w") as f:
            f.write(header + text)
    print(f"{len(CASES)} cases")


if __name__ == "__main__":
    main()
