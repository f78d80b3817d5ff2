"""torch.fx graphs of ATen operators -> ferry.v1.Program.

The graph is what ``make_fx`` (torch 1.13) or ``torch.export`` (torch >= 2.1)
produces: placeholders, ``call_function`` nodes calling ``OpOverload``s,
``operator.getitem`` on tuple results, ``get_attr`` for lifted tensor
constants, and one ``output``. Every node carries ``meta["val"]`` (a
FakeTensor) or ``meta["tensor_meta"]``.

Anything the IR cannot express (dynamic shapes, quantized or complex dtypes,
sparse layouts, Python-level calls, float lists, ...) raises
:class:`ferry.FerryError` naming the node and its source line.
"""

import dataclasses
import operator
import os
import zlib
from typing import Dict, List, Optional, Sequence

import torch
import torch.fx

from ferry import FerryError
from ferry.proto import program_pb2 as pb

# Kinds of method inputs, as the converter's callers name them.
USER_INPUT = "user_input"
PARAMETER = "parameter"
BUFFER = "buffer"
CONSTANT = "constant"  # a lifted tensor constant

_INPUT_KINDS = {
    USER_INPUT: pb.USER_INPUT,
    PARAMETER: pb.PARAMETER,
    BUFFER: pb.BUFFER,
    CONSTANT: pb.LIFTED_CONSTANT,
}

_DTYPES = {
    torch.float32: pb.F32,
    torch.float16: pb.F16,
    torch.bfloat16: pb.BF16,
    torch.float64: pb.F64,
    torch.int8: pb.I8,
    torch.uint8: pb.U8,
    torch.int16: pb.I16,
    torch.int32: pb.I32,
    torch.int64: pb.I64,
    torch.bool: pb.BOOL,
}

# ATen passes these enums as ints (c10::MemoryFormat, c10::Layout).
_MEMORY_FORMATS = {
    torch.contiguous_format: 0,
    torch.preserve_format: 1,
    torch.channels_last: 2,
    torch.channels_last_3d: 3,
}

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_FERRY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))
# torch 1.x records stack traces innermost frame first (walk_stack).
_INNERMOST_FIRST = torch.__version__.split(".")[0] == "1"


@dataclasses.dataclass
class InputInfo:
    """What one placeholder of the graph is."""
    kind: str  # USER_INPUT, PARAMETER, BUFFER or CONSTANT
    # The IR node name (user inputs: the forward argument's name).
    name: str
    # For program data: the constants-table name (the state_dict key) and
    # the tensor (None with weights=False).
    target: str = ""
    tensor: Optional[torch.Tensor] = None


def dtype_of(dtype, subject):
    if dtype in _DTYPES:
        return _DTYPES[dtype]
    if getattr(dtype, "is_complex", False):
        what = "complex"
    elif dtype in (torch.qint8, torch.quint8, torch.qint32) or "q" in str(
            dtype).split(".")[-1][:2]:
        what = "quantized"
    else:
        what = "unsupported"
    raise FerryError(f"{subject}: {what} dtype {dtype} cannot be expressed in "
                     "a Ferry program (f32, f16, bf16, f64, i8, u8, i16, i32, "
                     "i64, bool)")


def _int(value, subject, what):
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if type(value).__name__ in ("SymInt", "PySymInt", "SymIntNode"):
        raise FerryError(f"{subject}: dynamic shape ({what} {value} is "
                         "symbolic); Ferry programs have static shapes: "
                         "export with fixed input sizes")
    raise FerryError(f"{subject}: {what} {value!r} is not an int")


def _contiguous_strides(sizes):
    strides, step = [], 1
    for s in reversed(sizes):
        strides.append(step)
        step *= max(s, 1)
    return list(reversed(strides))


def tensor_spec(value, subject):
    """A TensorSpec from a (fake) tensor or a TensorMetadata."""
    spec = pb.TensorSpec()
    if isinstance(value, torch.Tensor):
        layout = value.layout
        if layout != torch.strided:
            raise FerryError(f"{subject}: {layout} tensors (sparse layouts) "
                             "cannot be expressed; Ferry tensors are strided")
        if value.is_quantized:
            raise FerryError(f"{subject}: quantized dtype {value.dtype} cannot "
                             "be expressed in a Ferry program")
        dtype = value.dtype
        sizes = [_int(s, subject, "size") for s in value.shape]
        strides = [_int(s, subject, "stride") for s in value.stride()]
        offset = _int(value.storage_offset(), subject, "storage offset")
    else:  # torch.fx.passes.shape_prop.TensorMetadata
        if getattr(value, "is_quantized", False):
            raise FerryError(f"{subject}: quantized dtype {value.dtype} cannot "
                             "be expressed in a Ferry program")
        dtype = value.dtype
        sizes = [_int(s, subject, "size") for s in value.shape]
        strides = [_int(s, subject, "stride") for s in value.stride]
        offset = 0
    spec.dtype = dtype_of(dtype, subject)
    spec.sizes.extend(sizes)
    if strides != _contiguous_strides(sizes):
        spec.strides.extend(strides)
    spec.storage_offset = offset
    return spec


def _is_tensor_value(v):
    return isinstance(v, torch.Tensor) or type(v).__name__ == "TensorMetadata"


def node_value(node):
    """The node's example value: meta["val"], else meta["tensor_meta"]."""
    if "val" in node.meta:
        return node.meta["val"]
    return node.meta.get("tensor_meta")


def constant_data(tensor):
    """Raw little-endian bytes of the storage `tensor`'s spec spans."""
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.numel() == 0:
        return b""
    span = t.storage_offset() + 1 + sum(
        (s - 1) * st for s, st in zip(t.shape, t.stride()))
    flat = torch.as_strided(t, (span,), (1,), 0).contiguous()
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    return flat.view(torch.uint8).numpy().tobytes()


def _skipped_frame(path):
    """Frames of torch, of this package and of the standard library are
    never the user's model code (site-packages below the stdlib are)."""
    if path.startswith(_TORCH_DIR + os.sep) or path.startswith(_FERRY_DIR +
                                                               os.sep):
        return True
    if path.startswith(_STDLIB_DIR + os.sep):
        return "-packages" + os.sep not in path[len(_STDLIB_DIR):]
    return False


def source_of(node):
    """(file, line) of the user code a node came from, or None."""
    trace = node.meta.get("stack_trace") or getattr(node, "stack_trace", None)
    if not trace:
        return None
    frames = []
    for line in trace.splitlines():
        line = line.strip()
        if not line.startswith('File "'):
            continue
        try:
            path, rest = line[6:].split('", line ', 1)
            number = int(rest.split(",", 1)[0])
        except ValueError:
            continue
        if path.startswith("<"):
            continue
        absolute = os.path.abspath(path)
        if _skipped_frame(absolute):
            continue
        frames.append((path, number))
    if not frames:
        return None
    path, number = frames[0] if _INNERMOST_FIRST else frames[-1]
    relative = os.path.relpath(os.path.abspath(path))
    if not relative.startswith(".."):
        path = relative
    return path, number


def op_name(target):
    """'aten::convolution', 'aten::add.Tensor' for an OpOverload."""
    schema = target._schema
    name = schema.name
    if schema.overload_name:
        name += "." + schema.overload_name
    return name


class _Converter:

    def __init__(self, gm, inputs, method, weights, schemas, known_ops,
                 mutated_buffers):
        self.gm = gm
        self.inputs = inputs
        self.method_name = method
        self.weights = weights
        self.schemas = schemas
        self.known_ops = known_ops
        self.mutated = set(mutated_buffers or ())
        self.program = pb.Program()
        self.method = self.program.methods.add()
        self.method.name = method
        self.names = {}  # fx node -> IR node name
        self.used = set()
        self.constants = {}  # constants-table name -> Constant
        self.lifted = 0

    # --- Helpers

    def where(self, node):
        loc = source_of(node) if node.op != "placeholder" else None
        text = f"node '{self.names.get(node, node.name)}'"
        if loc:
            text += f" ({loc[0]}:{loc[1]})"
        if node.op == "call_function" and hasattr(node.target, "_schema"):
            text += f" [{op_name(node.target)}]"
        return text

    def unique(self, wanted):
        name, i = wanted, 1
        while name in self.used or name == "output":
            name = f"{wanted}_{i}"
            i += 1
        self.used.add(name)
        return name

    def add_constant(self, name, tensor, subject):
        if name in self.constants:
            return
        c = self.program.constants.add()
        c.name = name
        c.spec.CopyFrom(tensor_spec(tensor, subject))
        if self.weights and not isinstance(
                tensor, torch._subclasses.fake_tensor.FakeTensor):
            c.data = constant_data(tensor)
        else:
            c.seed = zlib.crc32(name.encode())
        self.constants[name] = c

    def new_node(self, fx_node, name):
        n = self.method.nodes.add()
        n.name = name
        n.source.name = fx_node.name
        # A placeholder's stack is the tracing caller's, not the model's.
        loc = source_of(fx_node) if fx_node.op != "placeholder" else None
        if loc:
            n.source.file, n.source.line = loc[0], loc[1]
        tag = fx_node.meta.get("delegation_tag")
        if tag:
            n.delegation_tag = str(tag)
        return n

    def set_result(self, n, fx_node):
        value = node_value(fx_node)
        subject = self.where(fx_node)
        if value is None and fx_node.op == "call_function":
            value = _rerun_on_fake(fx_node)
            if value is not None:
                fx_node.meta["val"] = value
        if value is None:
            raise FerryError(f"{subject}: no example value (meta['val'] or "
                             "meta['tensor_meta']); trace with make_fx or "
                             "torch.export")
        if _is_tensor_value(value):
            n.tensor.CopyFrom(tensor_spec(value, subject))
        elif isinstance(value, (tuple, list)) and any(
                _is_tensor_value(v) for v in value) and all(
                    v is None or _is_tensor_value(v) for v in value):
            # An element ATen leaves undefined (None: the attention weights
            # of _native_multi_head_attention with need_weights=False) is
            # declared as an empty tensor; reading it is an error (getitem).
            first = next(v for v in value if v is not None)
            for v in value:
                if v is None:
                    e = n.tuple.elements.add()
                    e.dtype = dtype_of(first.dtype, subject)
                    e.sizes.append(0)
                else:
                    n.tuple.elements.add().CopyFrom(tensor_spec(v, subject))
        elif isinstance(value, (int, float, bool)) or type(
                value).__name__.startswith("Sym"):
            raise FerryError(f"{subject}: a scalar-valued operator; only "
                             "static shapes can be expressed (dynamic shape?)")
        else:
            raise FerryError(f"{subject}: result of type "
                             f"{type(value).__name__} cannot be expressed")

    # --- Arguments

    def ref(self, fx_node, user):
        if fx_node not in self.names:
            raise FerryError(f"{self.where(user)}: reads '{fx_node.name}', "
                             "which was not converted")
        value = node_value(fx_node)
        if fx_node.op != "get_attr" and not _is_tensor_value(value):
            raise FerryError(f"{self.where(user)}: argument '{fx_node.name}' "
                             "is not a tensor (dynamic shape?)")
        return self.names[fx_node]

    def lift_scalar(self, value, user):
        """A Python number where the schema wants a Tensor: a 0-dim lifted
        constant, as torch.export lifts tensor constants."""
        dtype = (torch.bool if isinstance(value, bool) else
                 torch.int64 if isinstance(value, int) else torch.float32)
        tensor = torch.tensor(value, dtype=dtype)
        name = self.unique(f"_scalar_constant{self.lifted}")
        self.lifted += 1
        self.add_constant(name, tensor, self.where(user))
        n = self.method.nodes.add()
        n.name = name
        n.input.kind = pb.LIFTED_CONSTANT
        n.input.target = name
        n.tensor.CopyFrom(tensor_spec(tensor, name))
        return name

    def argument(self, arg, value, param_type, user):
        subject = self.where(user)
        if isinstance(value, torch.fx.Node):
            arg.value = self.ref(value, user)
        elif value is None:
            arg.none.SetInParent()
        elif isinstance(value, bool):
            arg.bool_value = value
        elif isinstance(value, int):
            arg.int_value = value
        elif isinstance(value, float):
            arg.float_value = value
        elif isinstance(value, torch.dtype):
            arg.dtype = dtype_of(value, subject)
        elif isinstance(value, torch.device):
            arg.string_value = str(value)
        elif isinstance(value, torch.layout):
            if value != torch.strided:
                raise FerryError(f"{subject}: layout {value} (sparse) cannot "
                                 "be expressed")
            arg.int_value = 0
        elif isinstance(value, torch.memory_format):
            arg.int_value = _MEMORY_FORMATS[value]
        elif isinstance(value, str):
            arg.string_value = value
        elif isinstance(value, (list, tuple)):
            self.list_argument(arg, value, param_type, user)
        elif isinstance(value, torch.Tensor):
            raise FerryError(f"{subject}: a tensor constant inside the graph's "
                             "arguments; lift it (torch.export does)")
        elif type(value).__name__.startswith("Sym"):
            raise FerryError(f"{subject}: dynamic shape (argument {value} is "
                             "symbolic); export with fixed input sizes")
        else:
            raise FerryError(f"{subject}: argument of type "
                             f"{type(value).__name__} cannot be expressed")

    def list_argument(self, arg, value, param_type, user):
        subject = self.where(user)
        kind = str(param_type)
        if any(isinstance(v, torch.fx.Node) for v in value):
            if kind.startswith("Optional[Tensor]") or None in value:
                raise FerryError(f"{subject}: a Tensor?[] argument with "
                                 "None entries cannot be expressed")
            if not all(isinstance(v, torch.fx.Node) for v in value):
                raise FerryError(f"{subject}: a list mixing tensors and "
                                 "other values cannot be expressed")
            values = arg.values
            values.SetInParent()
            for v in value:
                if v.op != "get_attr" and not _is_tensor_value(
                        node_value(v)):
                    raise FerryError(f"{subject}: dynamic shape (list "
                                     f"element '{v.name}' is symbolic); export "
                                     "with fixed input sizes")
                values.values.add().node = self.ref(v, user)
            return
        if all(isinstance(v, bool) for v in value) and value:
            raise FerryError(f"{subject}: a bool list argument cannot be "
                             "expressed in a Ferry program")
        if all(isinstance(v, int) and not isinstance(v, bool)
               for v in value):
            arg.ints.SetInParent()
            arg.ints.values.extend(value)
            return
        for v in value:
            if type(v).__name__.startswith("Sym"):
                raise FerryError(f"{subject}: dynamic shape (argument {v} is "
                                 "symbolic); export with fixed input sizes")
        raise FerryError(f"{subject}: a list of {type(value[0]).__name__} "
                         "cannot be expressed in a Ferry program")

    # --- Nodes

    def placeholder(self, fx_node, info):
        name = self.unique(info.name)
        self.names[fx_node] = name
        n = self.new_node(fx_node, name)
        kind = _INPUT_KINDS[info.kind]
        if info.kind == BUFFER and info.target in self.mutated:
            kind = pb.MUTABLE_BUFFER
        n.input.kind = kind
        if info.kind != USER_INPUT:
            n.input.target = info.target
            tensor = info.tensor
            if tensor is None:
                tensor = node_value(fx_node)
            self.add_constant(info.target, tensor, self.where(fx_node))
        self.set_result(n, fx_node)
        if n.WhichOneof("result") != "tensor":
            raise FerryError(f"{self.where(fx_node)}: input is not a tensor")

    def get_attr(self, fx_node):
        attr = self.gm
        for part in fx_node.target.split("."):
            attr = getattr(attr, part)
        if not isinstance(attr, torch.Tensor):
            raise FerryError(f"{self.where(fx_node)}: attribute "
                             f"'{fx_node.target}' is not a tensor")
        name = self.unique(fx_node.name)
        self.names[fx_node] = name
        self.add_constant(fx_node.target, attr, self.where(fx_node))
        n = self.new_node(fx_node, name)
        n.input.kind = pb.LIFTED_CONSTANT
        n.input.target = fx_node.target
        n.tensor.CopyFrom(tensor_spec(attr, self.where(fx_node)))

    def call(self, fx_node):
        target = fx_node.target
        if target is operator.getitem:
            return self.getitem(fx_node)
        if not isinstance(target, torch._ops.OpOverload):
            what = getattr(target, "__name__", str(target))
            raise FerryError(f"{self.where(fx_node)}: calls '{what}', which is "
                             "not an ATen operator; Ferry programs call "
                             "operators only (dynamic shape?)")
        schema = target._schema
        args, kwargs = list(fx_node.args), dict(fx_node.kwargs)
        params = list(schema.arguments)
        # A Python number where the schema wants a Tensor: the operator's
        # `.Scalar` overload when it takes the same arguments, else lift.
        numbers = [
            i for i, (param, value) in enumerate(zip(params, args))
            if str(param.type) == "Tensor" and isinstance(value, (int, float,
                                                                 bool))
        ]
        if numbers:
            scalar = _scalar_overload(target)
            # Only where the overload takes every such number as a Scalar
            # (not rsub-like calls with the number as `self`).
            if scalar is not None and all(
                    str(scalar._schema.arguments[i].type) != "Tensor"
                    for i in numbers):
                target, schema = scalar, scalar._schema
                params = list(schema.arguments)
        by_name = {p.name: p for p in params}
        # Python numbers left where the schema wants a Tensor: lifted 0-dim
        # constants, placed before the call.
        lifted = {}
        for key, value in list(enumerate(args)) + list(kwargs.items()):
            param = (params[key] if isinstance(key, int) and key < len(params)
                     else by_name.get(key))
            if (param is not None and str(param.type) == "Tensor" and
                    isinstance(value, (int, float, bool))):
                lifted[key] = self.lift_scalar(value, fx_node)
        name = self.unique(fx_node.name)
        n = self.new_node(fx_node, name)
        n.call.op = op_name(target)
        if self.schemas == "always" or (self.schemas == "unknown" and
                                        n.call.op not in self.known_ops):
            n.call.schema = str(schema)
        for i, value in enumerate(args):
            param = params[i] if i < len(params) else None
            self.one_argument(n.call.args.add(), value, param, fx_node,
                              lifted.get(i))
        for key, value in kwargs.items():
            a = n.call.args.add()
            a.name = key
            self.one_argument(a, value, by_name.get(key), fx_node,
                              lifted.get(key))
        self.names[fx_node] = name
        self.set_result(n, fx_node)

    def one_argument(self, arg, value, param, fx_node, lifted=None):
        if lifted is not None:
            arg.value = lifted
            return
        self.argument(arg, value, param.type if param is not None else None,
                      fx_node)

    def getitem(self, fx_node):
        source, index = fx_node.args
        if not fx_node.users:
            return  # an unread element: no node
        if not isinstance(source, torch.fx.Node) or source not in self.names:
            raise FerryError(f"{self.where(fx_node)}: getitem of something "
                             "that is not a converted node")
        name = self.unique(fx_node.name)
        n = self.new_node(fx_node, name)
        n.getitem.source = self.names[source]
        n.getitem.index = _int(index, self.where(fx_node), "index")
        self.names[fx_node] = name
        self.set_result(n, fx_node)

    def output(self, fx_node):
        n = self.method.nodes.add()
        n.name = "output"
        values = fx_node.args[0]
        if not isinstance(values, (list, tuple)):
            values = [values]
        for v in values:
            if not isinstance(v, torch.fx.Node):
                raise FerryError(f"node 'output': returns {v!r}; Ferry "
                                 "methods return tensors only")
            n.output.values.add().value = self.ref(v, fx_node)

    def run(self):
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(self.inputs):
            raise FerryError(f"the graph has {len(placeholders)} inputs, but "
                             f"{len(self.inputs)} were described")
        infos = dict(zip(placeholders, self.inputs))
        for fx_node in self.gm.graph.nodes:
            if fx_node.op == "placeholder":
                self.placeholder(fx_node, infos[fx_node])
            elif fx_node.op == "get_attr":
                self.get_attr(fx_node)
            elif fx_node.op == "call_function":
                self.call(fx_node)
            elif fx_node.op == "output":
                self.output(fx_node)
            else:
                raise FerryError(f"{self.where(fx_node)}: '{fx_node.op}' nodes "
                                 "cannot be expressed (trace to ATen "
                                 "operators with make_fx or torch.export)")
        return self.program


def _rerun_on_fake(fx_node):
    """The example value of a node make_fx left without one (torch 1.13
    records none for tuple results): the operator run again on its
    arguments' fake values."""
    fake_mode = None

    def value(a):
        nonlocal fake_mode
        if isinstance(a, torch.fx.Node):
            v = a.meta.get("val")
            if v is None:
                raise LookupError(a.name)
            fake_mode = getattr(v, "fake_mode", fake_mode)
            return v
        return a

    try:
        args = torch.fx.node.map_aggregate(fx_node.args, value)
        kwargs = torch.fx.node.map_aggregate(fx_node.kwargs, value)
        if fake_mode is None:
            return None
        with fake_mode:
            return fx_node.target(*args, **kwargs)
    except Exception:  # no value: reported by the caller
        return None


def _scalar_overload(target):
    packet = getattr(torch.ops.aten, target._schema.name.split("::")[-1], None)
    if packet is None or "Scalar" not in packet.overloads():
        return None
    scalar = packet.Scalar
    old = [a.name for a in target._schema.arguments]
    new = [a.name for a in scalar._schema.arguments]
    return scalar if old == new else None


def graph_to_program(gm: torch.fx.GraphModule,
                     inputs: Sequence[InputInfo],
                     *,
                     method: str = "forward",
                     weights: bool = True,
                     schemas: str = "always",
                     known_ops: Sequence[str] = (),
                     mutated_buffers: Sequence[str] = ()) -> "pb.Program":
    """Converts a traced GraphModule; `inputs` describes its placeholders in
    order. schemas: "always" sends every call's ATen schema (the node's
    aliasing then always comes from PyTorch); "unknown" only for operators
    not in `known_ops`; "never" sends none (`ferry check` then lists the
    operators its registry lacks). mutated_buffers: constants-table names of buffers
    the graph writes (MUTABLE_BUFFER)."""
    if schemas not in ("always", "unknown", "never"):
        raise FerryError(f"schemas must be 'always', 'unknown' or 'never', not "
                         f"{schemas!r}", exit_code=2)
    return _Converter(gm, list(inputs), method, weights, schemas,
                      set(known_ops), mutated_buffers).run()


def written_roots(gm: torch.fx.GraphModule) -> List[torch.fx.Node]:
    """Placeholders written in place (through views too), from the
    operators' alias annotations."""
    root: Dict[torch.fx.Node, Optional[torch.fx.Node]] = {}
    written = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            root[node] = node
            continue
        if node.op != "call_function":
            root[node] = None
            continue
        if node.target is operator.getitem:
            src = node.args[0]
            root[node] = root.get(src) if isinstance(src,
                                                     torch.fx.Node) else None
            continue
        schema = getattr(node.target, "_schema", None)
        if schema is None:
            root[node] = None
            continue
        aliased = {}
        for i, a in enumerate(schema.arguments):
            info = a.alias_info
            value = node.args[i] if i < len(node.args) else node.kwargs.get(
                a.name)
            if info is None or not isinstance(value, torch.fx.Node):
                continue
            r = root.get(value)
            for s in info.before_set:
                aliased[s] = r
            if info.is_write and r is not None and r not in written:
                written.append(r)
        root[node] = None
        for ret in schema.returns:
            info = ret.alias_info
            if info is not None:
                for s in info.before_set:
                    if aliased.get(s) is not None:
                        root[node] = aliased[s]
    return written
