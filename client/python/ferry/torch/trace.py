"""Tracing a torch.nn.Module into an ATen graph and converting it.

torch 1.13: ``make_fx`` (fake tensors, eval mode, ``torch.no_grad()``) of
``stateless.functional_call(module, state, inputs)``, so that parameters and
buffers are graph inputs. torch >= 2.1: ``torch.export.export``, whose graph
signature says which input is a user input, a parameter, a buffer or a
lifted constant, and which buffers the graph mutates.
"""

import contextlib
import inspect
from typing import Optional, Sequence

import torch

from ferry import FerryError
from ferry.torch import convert


def has_torch_export():
    return hasattr(torch, "export") and hasattr(torch.export, "export")


def _user_input_names(module, count):
    names = []
    try:
        params = list(inspect.signature(module.forward).parameters.values())
        names = [
            p.name for p in params
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        pass
    if len(names) < count:
        names = [f"input{i}" for i in range(count)]
    return names[:count]


@contextlib.contextmanager
def _record_stack_traces():
    import torch.fx.proxy as proxy
    old = proxy.TracerBase.record_stack_traces
    proxy.TracerBase.record_stack_traces = True
    try:
        yield
    finally:
        proxy.TracerBase.record_stack_traces = old


def _check_inputs(example_inputs):
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise FerryError(f"example input {i} is a {type(x).__name__}; "
                             "Ferry methods take tensors", exit_code=2)
        convert.tensor_spec(x, f"example input {i}")


def _state_aliases(module, params, buffers, names):
    """Other names of the listed parameters and buffers -> listed name."""
    by_id = {}
    for name in names:
        t = params.get(name, buffers.get(name))
        by_id.setdefault(id(t), name)
    aliases = {}
    for prefix, sub in module.named_modules(remove_duplicate=False):
        for table in (sub._parameters, sub._buffers):
            for attr, t in table.items():
                full = f"{prefix}.{attr}" if prefix else attr
                if t is not None and full not in params and (
                        full not in buffers) and id(t) in by_id:
                    aliases[full] = by_id[id(t)]
    return aliases


def trace_make_fx(module: torch.nn.Module,
                  example_inputs: Sequence[torch.Tensor],
                  *,
                  weights: bool = True,
                  dynamic: bool = False,
                  schemas: str = "always",
                  known_ops: Sequence[str] = ()):
    """torch 1.13's path: make_fx with the module's state as explicit
    inputs. dynamic=True traces with symbolic shapes (which Ferry cannot
    express: the converter reports the first symbolic node)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    try:
        from torch.func import functional_call
    except ImportError:
        from torch.nn.utils.stateless import functional_call

    _check_inputs(example_inputs)
    module = module.eval()
    params = list(module.named_parameters())
    buffers = list(module.named_buffers())
    names = [n for n, _ in params] + [n for n, _ in buffers]
    kinds = [convert.PARAMETER] * len(params) + [convert.BUFFER] * len(buffers)
    tensors = [t.detach() for _, t in params] + [t for _, t in buffers]
    for name, t in zip(names, tensors):
        convert.tensor_spec(t, f"'{name}'")
    # Tied weights (one Parameter under several names, which
    # named_parameters lists once): every name gets the traced tensor.
    aliases = _state_aliases(module, dict(params), dict(buffers), names)

    def forward(state, *inputs):
        values = dict(zip(names, state))
        values.update({a: values[n] for a, n in aliases.items()})
        return functional_call(module, values, tuple(inputs))

    mode = "symbolic" if dynamic else "fake"
    with torch.no_grad(), _record_stack_traces():
        try:
            gm = make_fx(forward, tracing_mode=mode)(tensors,
                                                     *example_inputs)
        except Exception as e:
            # Fake tensors do not cover everything (quantized tensors): a
            # real trace, so that the converter can name the node.
            try:
                gm = make_fx(forward, tracing_mode="real")(tensors,
                                                           *example_inputs)
            except Exception:
                raise FerryError(
                    f"tracing failed: {type(e).__name__}: "
                    f"{str(e).splitlines()[0] if str(e) else ''}") from None
    infos = []
    for name, kind, t in zip(names, kinds, tensors):
        ir = ("p_" if kind == convert.PARAMETER else "b_") + name.replace(
            ".", "_")
        infos.append(convert.InputInfo(kind, ir, name, t))
    for name in _user_input_names(module, len(example_inputs)):
        infos.append(convert.InputInfo(convert.USER_INPUT, name))
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    mutated = {
        infos[placeholders.index(p)].target
        for p in convert.written_roots(gm)
        if infos[placeholders.index(p)].kind == convert.BUFFER
    }
    # Program data the graph never reads (num_batches_tracked in eval mode)
    # is left out.
    keep = [
        i for i, p in enumerate(placeholders)
        if infos[i].kind == convert.USER_INPUT or p.users
    ]
    for i, p in reversed(list(enumerate(placeholders))):
        if i not in keep:
            gm.graph.erase_node(p)
    infos = [infos[i] for i in keep]
    return convert.graph_to_program(gm,
                                    infos,
                                    weights=weights,
                                    schemas=schemas,
                                    known_ops=known_ops,
                                    mutated_buffers=sorted(mutated))


def exported_to_program(ep,
                        *,
                        weights: bool = True,
                        schemas: str = "always",
                        known_ops: Sequence[str] = (),
                        decompose: bool = True):
    """torch >= 2.1's path: converts a torch.export.ExportedProgram.

    Its graph signature tells user inputs, parameters, buffers and lifted
    constants apart; a mutated buffer becomes a MUTABLE_BUFFER input written
    with aten::copy_ from the graph's new value (the functional graph
    returns it as an extra output)."""
    if decompose and hasattr(ep, "run_decompositions"):
        try:
            ep = ep.run_decompositions()
        except Exception as e:
            raise FerryError(f"run_decompositions failed: {type(e).__name__}: "
                             f"{e}") from None
    gm = ep.graph_module
    sig = ep.graph_signature
    state = dict(ep.state_dict)
    constants = dict(getattr(ep, "constants", None) or
                     getattr(ep, "tensor_constants", None) or {})
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    infos = []
    mutated = {}  # output node name -> buffer target
    writes = []  # per output: None (a user output) or (kind, input written)
    if hasattr(sig, "input_specs"):  # torch >= 2.2
        for p, spec in zip(placeholders, sig.input_specs):
            kind = spec.kind.name
            target = getattr(spec, "target", None) or ""
            if kind == "USER_INPUT":
                infos.append(convert.InputInfo(convert.USER_INPUT, p.name))
            elif kind == "PARAMETER":
                infos.append(
                    convert.InputInfo(convert.PARAMETER, p.name, target,
                                      state.get(target)))
            elif kind == "BUFFER":
                tensor = state.get(target, constants.get(target))
                infos.append(
                    convert.InputInfo(convert.BUFFER, p.name, target, tensor))
            elif kind == "CONSTANT_TENSOR":
                infos.append(
                    convert.InputInfo(convert.CONSTANT, p.name, target,
                                      constants.get(target)))
            else:
                raise FerryError(f"node '{p.name}': input of kind {kind} "
                                 "cannot be expressed in a Ferry program")
        for spec in sig.output_specs:
            kind = spec.kind.name
            if kind == "USER_OUTPUT":
                writes.append(None)
            elif kind == "BUFFER_MUTATION":
                mutated[spec.arg.name] = spec.target
                writes.append(("buffer", spec.target))
            elif kind == "USER_INPUT_MUTATION":
                writes.append(("input", spec.target))
            else:
                raise FerryError(f"output '{spec.arg.name}' of kind {kind} "
                                 "cannot be expressed in a Ferry program")
    else:  # torch 2.1
        to_param = dict(sig.inputs_to_parameters)
        to_buffer = dict(sig.inputs_to_buffers)
        for p in placeholders:
            if p.name in to_param:
                t = to_param[p.name]
                infos.append(
                    convert.InputInfo(convert.PARAMETER, p.name, t,
                                      state.get(t)))
            elif p.name in to_buffer:
                t = to_buffer[p.name]
                infos.append(
                    convert.InputInfo(convert.BUFFER, p.name, t, state.get(t)))
            else:
                infos.append(convert.InputInfo(convert.USER_INPUT, p.name))
        mutated = dict(sig.buffers_to_mutate)
        # 2.1 returns the buffers' new values first, then the user outputs.
        writes = [("buffer", t) for t in mutated.values()]
        writes += [None] * len(sig.user_outputs)
    if any(w is not None for w in writes):
        _write_back_mutations(gm, placeholders, infos, writes)
    return convert.graph_to_program(gm,
                                    infos,
                                    weights=weights,
                                    schemas=schemas,
                                    known_ops=known_ops,
                                    mutated_buffers=sorted(
                                        set(mutated.values())))


def _write_back_mutations(gm, placeholders, infos, writes):
    """Mutations of a functional graph: `writes` gives, per output position,
    the buffer target or user input name it is the new value of (None for a
    user output). Each new value is copy_'d into its input; the output keeps
    the user outputs."""
    graph = gm.graph
    by_target = {
        info.target: p
        for p, info in zip(placeholders, infos) if info.kind == convert.BUFFER
    }
    by_name = {p.name: p for p in placeholders}
    output = next(n for n in graph.nodes if n.op == "output")
    values = output.args[0]
    if not isinstance(values, (list, tuple)):
        values = [values]
    if len(values) != len(writes):
        raise FerryError(f"the graph returns {len(values)} values, its "
                         f"signature describes {len(writes)}")
    kept = []
    with graph.inserting_before(output):
        for v, write in zip(values, writes):
            if write is None:
                kept.append(v)
                continue
            kind, name = write
            target = by_target.get(name) if kind == "buffer" else by_name.get(
                name)
            if target is None or not isinstance(v, torch.fx.Node):
                raise FerryError(f"output '{getattr(v, 'name', v)}' mutates "
                                 f"'{name}', which is not a graph input")
            copy = graph.call_function(torch.ops.aten.copy_.default,
                                       (target, v))
            copy.meta["val"] = target.meta.get("val")
            copy.meta["stack_trace"] = v.meta.get("stack_trace")
    output.args = (tuple(kept),)


def module_to_program(module: torch.nn.Module,
                      example_inputs: Sequence[torch.Tensor],
                      *,
                      weights: bool = True,
                      frontend: str = "auto",
                      dynamic: bool = False,
                      schemas: str = "auto",
                      tool: Optional[str] = None):
    """Traces `module` on `example_inputs` (eval mode, no_grad) and converts
    it. frontend: "make_fx" (torch 1.13's path), "export" (torch.export,
    torch >= 2.1) or "auto" (export where available). schemas: "auto" (a
    call carries its ATen schema only when the registry of the ferry tool
    `tool` (default: found as ferry.torch.cli.ferry_tool does) lacks its
    operator; see ferry.torch.registry), "always" or "never"."""
    program = _module_to_program(module, example_inputs, weights, frontend,
                                 dynamic, "never" if schemas == "never" else
                                 "always")
    if schemas == "auto":
        from ferry.torch import registry
        if tool is None:
            from ferry.torch.cli import ferry_tool
            tool = ferry_tool()
        registry.keep_schemas_of(program,
                                 registry.unknown_operators(program, tool))
    elif schemas not in ("always", "never"):
        raise FerryError(f"schemas: auto, always or never, not '{schemas}'",
                         exit_code=2)
    return program


def _module_to_program(module, example_inputs, weights, frontend, dynamic,
                       schemas, known_ops=()):
    if frontend == "auto":
        frontend = "export" if has_torch_export() else "make_fx"
    if frontend == "make_fx":
        return trace_make_fx(module,
                             example_inputs,
                             weights=weights,
                             dynamic=dynamic,
                             schemas=schemas,
                             known_ops=known_ops)
    if frontend != "export":
        raise FerryError(f"unknown frontend '{frontend}' (auto, make_fx, "
                         "export)", exit_code=2)
    if not has_torch_export():
        raise FerryError(f"torch.export is not available in torch "
                         f"{torch.__version__} (it needs torch >= 2.1); use "
                         "--frontend=make_fx", exit_code=2)
    _check_inputs(example_inputs)
    module = module.eval()
    dynamic_shapes = None
    if dynamic:
        dim = torch.export.Dim("batch")
        dynamic_shapes = tuple({0: dim} for _ in example_inputs)
    with torch.no_grad():
        try:
            ep = torch.export.export(module,
                                     tuple(example_inputs),
                                     dynamic_shapes=dynamic_shapes)
        except Exception as e:
            raise FerryError(f"torch.export failed: {type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''}"
                             ) from None
    return exported_to_program(ep,
                               weights=weights,
                               schemas=schemas,
                               known_ops=known_ops)


def example_input_set(program, example_inputs, method: str = "forward"):
    """A ferry.v1.InputSet giving the program's user inputs these values
    (for ``ferry verify --inputs``)."""
    from ferry.proto import program_pb2 as pb
    m = next(m for m in program.methods if m.name == method)
    names = [
        n.name for n in m.nodes
        if n.WhichOneof("kind") == "input" and n.input.kind == pb.USER_INPUT
    ]
    if len(names) != len(example_inputs):
        raise FerryError(f"method '{method}' has {len(names)} user inputs, "
                         f"{len(example_inputs)} values were given")
    inputs = pb.InputSet()
    for name, x in zip(names, example_inputs):
        v = inputs.values.add()
        v.method = method
        v.input = name
        v.spec.dtype = convert.dtype_of(x.dtype, f"input '{name}'")
        v.spec.sizes.extend(x.shape)
        v.data = convert.constant_data(x.contiguous())
    return inputs
