"""python3 -m ferry.torch export|lower|verify (docs/frontend.md).

  export MODEL -o OUT [--input SHAPE[:DTYPE]]... [--no-weights]
         [--inputs-out FILE] [--reference-out FILE] [--seed N]
  lower  FILE|MODEL [--server ADDR ...] [lowering options]
  verify FILE|MODEL [--server ADDR ...] [--device D] [--inputs FILE]
         [lowering options]

MODEL is torchvision:NAME (built with weights=None: random initialisation,
nothing is downloaded) or path/to/module.py:ClassName (constructed with no
arguments). Exit codes as the ferry tool's: 0 ok, 1 a model that cannot be
expressed, compile errors or a mismatch, 2 usage or unreadable input, 3 the
requested device is not available.
"""

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

from ferry import FerryError

USAGE_EXIT = 2

_DTYPE_NAMES = {
    "float32": "float32", "f32": "float32", "float": "float32",
    "float16": "float16", "f16": "float16", "half": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float64": "float64", "f64": "float64", "double": "float64",
    "int8": "int8", "i8": "int8", "uint8": "uint8", "u8": "uint8",
    "int16": "int16", "i16": "int16", "int32": "int32", "i32": "int32",
    "int64": "int64", "i64": "int64", "long": "int64", "bool": "bool",
}


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 2 with one line, like the ferry tool."""

    def error(self, message):
        raise FerryError(f"{self.prog}: {message}", exit_code=USAGE_EXIT)


# --- Models and inputs


def parse_input(text):
    """'1,3,224,224' or '2,6:int64' -> (sizes, dtype name)."""
    shape, _, dtype = text.partition(":")
    dtype = dtype or "float32"
    if dtype not in _DTYPE_NAMES:
        raise FerryError(f"--input {text}: unknown dtype '{dtype}' (float32, "
                         "float16, bfloat16, float64, int8, uint8, int16, "
                         "int32, int64, bool)", exit_code=USAGE_EXIT)
    try:
        sizes = [int(s) for s in shape.split(",")] if shape else []
    except ValueError:
        sizes = None
    if sizes is None or any(s < 0 for s in sizes):
        raise FerryError(f"--input {text}: SHAPE is comma-separated sizes, "
                         "e.g. 1,3,224,224", exit_code=USAGE_EXIT)
    return sizes, _DTYPE_NAMES[dtype]


def make_inputs(specs, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    out = []
    for sizes, dtype_name in specs:
        dtype = getattr(torch, dtype_name)
        if dtype.is_floating_point:
            out.append(torch.randn(sizes, generator=g).to(dtype))
        elif dtype == torch.bool:
            out.append(torch.randint(0, 2, sizes, generator=g).bool())
        else:
            out.append(torch.randint(0, 10, sizes, generator=g).to(dtype))
    return out


def load_model(spec):
    """torchvision:NAME or path/module.py:ClassName -> (module, default
    input specs or None)."""
    import torch
    if spec.startswith("torchvision:"):
        name = spec.split(":", 1)[1]
        try:
            import torchvision.models as models
        except ImportError as e:
            raise FerryError(f"{spec}: torchvision is not installed ({e}); "
                             "install python3-torchvision",
                             exit_code=USAGE_EXIT) from None
        builder = getattr(models, name, None)
        if builder is None or not callable(builder) or name.startswith("_"):
            raise FerryError(f"{spec}: torchvision.models has no model "
                             f"'{name}'", exit_code=USAGE_EXIT)
        try:
            model = builder(weights=None)
        except Exception as e:
            raise FerryError(f"{spec}: {type(e).__name__}: {e}",
                             exit_code=USAGE_EXIT) from None
        return model, [([1, 3, 224, 224], "float32")]
    path, sep, cls = spec.rpartition(":")
    if not sep or not path.endswith(".py") or not cls:
        raise FerryError(f"MODEL '{spec}': expected torchvision:NAME or "
                         "path/module.py:ClassName", exit_code=USAGE_EXIT)
    if not os.path.isfile(path):
        raise FerryError(f"{path}: no such file", exit_code=USAGE_EXIT)
    module_name = "_ferry_model_" + os.path.splitext(
        os.path.basename(path))[0]
    try:
        loader = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(loader)
        sys.modules[module_name] = module
        loader.loader.exec_module(module)
    except Exception as e:
        raise FerryError(f"{path}: cannot import: {type(e).__name__}: {e}",
                         exit_code=USAGE_EXIT) from None
    klass = getattr(module, cls, None)
    if klass is None:
        raise FerryError(f"{path}: no class '{cls}'", exit_code=USAGE_EXIT)
    try:
        model = klass()
    except Exception as e:
        raise FerryError(f"{path}:{cls}(): {type(e).__name__}: {e}",
                         exit_code=USAGE_EXIT) from None
    if not isinstance(model, torch.nn.Module):
        raise FerryError(f"{path}:{cls} is not a torch.nn.Module",
                         exit_code=USAGE_EXIT)
    return model, None


# --- Files


def write_message(path, message):
    from google.protobuf import json_format, text_format
    if path.endswith((".textproto", ".txtpb", ".pbtxt")):
        data = text_format.MessageToString(message).encode()
    elif path.endswith(".json"):
        data = json_format.MessageToJson(message,
                                         preserving_proto_field_name=True
                                         ).encode()
    elif path.endswith((".pb", ".binpb")):
        data = message.SerializeToString(deterministic=True)
    else:
        raise FerryError(f"{path}: unknown file format (use .textproto, "
                         ".txtpb, .pb, .binpb or .json)", exit_code=USAGE_EXIT)
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        raise FerryError(f"{path}: cannot write: {e.strerror}",
                         exit_code=USAGE_EXIT) from None


def read_message(path, cls):
    from google.protobuf import json_format, text_format
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise FerryError(f"{path}: cannot open file: {e.strerror}",
                         exit_code=USAGE_EXIT) from None
    message = cls()
    try:
        if path.endswith((".pb", ".binpb")):
            message.ParseFromString(data)
        elif path.endswith(".json"):
            json_format.Parse(data, message)
        else:
            text_format.Parse(data, message)
    except Exception:
        raise FerryError(f"{path}: not a {cls.DESCRIPTOR.full_name}",
                         exit_code=USAGE_EXIT) from None
    return message


def read_request(path):
    """A LowerRequest or a bare Program file -> LowerRequest."""
    from ferry.proto import program_pb2 as pb
    try:
        request = read_message(path, pb.LowerRequest)
        if request.program.methods:
            return request
    except FerryError:
        pass
    return pb.LowerRequest(program=read_message(path, pb.Program))


# --- export


def add_export_flags(p, with_output):
    if with_output:
        p.add_argument("-o", "--output", required=True,
                       help="the Program file to write (.binpb, .pb, "
                       ".textproto, .json)")
    p.add_argument("--input", action="append", default=[],
                   metavar="SHAPE[:DTYPE]",
                   help="one per model input, e.g. 1,3,224,224 or 2,6:int64 "
                   "(float32 by default; torchvision models: 1,3,224,224)")
    p.add_argument("--no-weights", action="store_true",
                   help="constants carry specs only (a Lower needs no data)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the model's random initialisation and of "
                   "the example inputs (0)")
    p.add_argument("--frontend", choices=["auto", "make_fx", "export"],
                   default="auto",
                   help="make_fx (torch 1.13) or torch.export (torch >= 2.1); "
                   "auto: torch.export where available")
    p.add_argument("--dynamic", action="store_true",
                   help="trace with symbolic shapes (Ferry programs are "
                   "static: reported as an error)")
    p.add_argument("--schemas", choices=["auto", "always", "never"],
                   default="auto",
                   help="auto: a call carries its ATen schema when the ferry "
                   "tool's registry lacks its operator (default); always; "
                   "never (ferry check then reports the operators the "
                   "registry lacks)")


def export_model(args):
    """-> (Program, example inputs, eager outputs or None)."""
    import torch
    from ferry.torch import trace
    torch.manual_seed(args.seed)
    model, default_inputs = load_model(args.model)
    specs = [parse_input(s) for s in args.input] or default_inputs
    if specs is None:
        raise FerryError(f"{args.model}: give one --input SHAPE[:DTYPE] per "
                         "model input", exit_code=USAGE_EXIT)
    inputs = make_inputs(specs, args.seed)
    program = trace.module_to_program(model,
                                      inputs,
                                      weights=not args.no_weights,
                                      frontend=args.frontend,
                                      dynamic=args.dynamic,
                                      schemas=args.schemas)
    return program, inputs, model


def eager_outputs(model, inputs):
    """PyTorch's own outputs as an InputSet (inputs output0, output1, ...,
    as ferry verify --dump-outputs writes Ferry's)."""
    import torch
    from ferry.proto import program_pb2 as pb
    from ferry.torch import convert
    with torch.no_grad():
        out = model.eval()(*inputs)
    flat = out if isinstance(out, (tuple, list)) else [out]
    result = pb.InputSet()
    for i, t in enumerate(flat):
        v = result.values.add()
        v.method = "forward"
        v.input = f"output{i}"
        v.spec.dtype = convert.dtype_of(t.dtype, f"output {i}")
        v.spec.sizes.extend(t.shape)
        v.data = convert.constant_data(t.contiguous())
    return result


def summary(path, program):
    """One export summary: inputs, nodes, constants, operators."""
    from collections import Counter
    from ferry.proto import program_pb2 as pb
    lines = []
    for m in program.methods:
        kinds = Counter()
        ops = Counter()
        tags = set()
        for n in m.nodes:
            k = n.WhichOneof("kind")
            if k == "input":
                kinds[pb.InputKind.Name(n.input.kind)] += 1
            elif k == "call":
                ops[n.call.op] += 1
            if n.delegation_tag:
                tags.add(n.delegation_tag)
        inputs = ", ".join(f"{v} {k.lower()}" for k, v in sorted(kinds.items()))
        lines.append(f"{path}: exported method '{m.name}': {len(m.nodes)} "
                     f"nodes, {sum(ops.values())} calls ({inputs})")
        lines.append("  delegation tags: " +
                     (", ".join(sorted(tags)) if tags else
                      "none (lower with --partitioner=capability)"))
        lines.append("  operators: " + ", ".join(
            f"{op} x{c}" for op, c in sorted(ops.items())))
    data = sum(len(c.data) for c in program.constants)
    with_data = sum(1 for c in program.constants if c.HasField("data"))
    lines.append(f"  constants: {len(program.constants)} ({data} B of data"
                 + ("" if with_data == len(program.constants) else
                    f"; {len(program.constants) - with_data} specs only, "
                    "seeded") + ")")
    return "\n".join(lines) + "\n"


def cmd_export(argv):
    p = _Parser(prog="ferry.torch export",
                description="Trace MODEL and write it as a ferry.v1.Program.")
    p.add_argument("model", metavar="MODEL",
                   help="torchvision:NAME or path/module.py:ClassName")
    add_export_flags(p, with_output=True)
    p.add_argument("--inputs-out", metavar="FILE",
                   help="write the example inputs as a ferry.v1.InputSet "
                   "(for ferry verify --inputs)")
    p.add_argument("--reference-out", metavar="FILE",
                   help="write PyTorch's eager outputs on them as an InputSet "
                   "(output0, ...; compare with ferry verify --dump-outputs)")
    p.add_argument("--request", action="store_true",
                   help="write a LowerRequest (capability partitioner when "
                   "the program has no delegation tags) instead of a bare "
                   "Program")
    args = p.parse_args(argv)
    from ferry.torch import trace
    program, inputs, model = export_model(args)
    message = program
    if args.request:
        message = _request_for(program)
    write_message(args.output, message)
    if args.inputs_out:
        write_message(args.inputs_out, trace.example_input_set(program,
                                                               inputs))
    if args.reference_out:
        write_message(args.reference_out, eager_outputs(model, inputs))
    sys.stdout.write(summary(args.output, program))
    return 0


def _has_tags(program):
    return any(n.delegation_tag for m in program.methods for n in m.nodes)


def _request_for(program):
    from ferry.proto import program_pb2 as pb
    request = pb.LowerRequest(program=program)
    if not _has_tags(program):
        request.options.partitioner.kind = pb.BY_CAPABILITY
    return request


# --- lower / verify


def add_remote_flags(p):
    g = p.add_argument_group("remote options (a ferryd instead of the ferry "
                             "tool in process)")
    g.add_argument("--server", metavar="ADDR", help="HOST:PORT of a ferryd")
    g.add_argument("--tls", action="store_true", help="use TLS")
    g.add_argument("--tls-ca", metavar="FILE")
    g.add_argument("--tls-cert", metavar="FILE")
    g.add_argument("--tls-key", metavar="FILE")
    g.add_argument("--tls-server-name", metavar="NAME")
    g.add_argument("--token-file", metavar="FILE")
    g.add_argument("--deadline", type=float, default=300.0, metavar="SECONDS")


def connect(args):
    from ferry.client import Client
    return Client(args.server,
                  tls=args.tls,
                  root_ca=args.tls_ca,
                  cert=args.tls_cert,
                  key=args.tls_key,
                  server_name=args.tls_server_name,
                  token_file=args.token_file,
                  deadline=args.deadline)


def apply_lowering_flags(flags, options):
    """The ferry tool's lowering flags, applied to a LowerOptions (for
    --server)."""
    from ferry.proto import program_pb2 as pb
    for flag in flags:
        name, eq, value = flag.partition("=")
        if name in ("--skip-h2d-inputs", "--skip-d2h-outputs"):
            f = (options.skip_h2d_for_method_inputs if name ==
                 "--skip-h2d-inputs" else options.skip_d2h_for_method_outputs)
            if value:
                f.per_method[value] = True
            else:
                f.default_value = True
        elif flag == "--error-on-per-call-copies":
            options.error_on_per_call_copies = True
        elif name == "--constant-staging" and value in ("at-load",
                                                         "per-call"):
            options.constant_staging = (pb.AT_LOAD if value == "at-load" else
                                        pb.PER_CALL)
        elif flag == "--no-device-memory-planning":
            options.enable_non_cpu_memory_planning = False
        elif flag == "--no-alloc-graph-input":
            options.alloc_graph_input = False
        elif flag == "--no-alloc-graph-output":
            options.alloc_graph_output = False
        elif name == "--partitioner" and value in ("tag", "capability",
                                                    "none"):
            options.partitioner.kind = {
                "tag": pb.BY_TAG,
                "capability": pb.BY_CAPABILITY,
                "none": pb.NONE
            }[value]
        elif name == "--target-device" and value:
            options.partitioner.target_device = value
        elif name == "--tag-target" and "=" in value:
            tag, _, device = value.partition("=")
            options.partitioner.tag_targets[tag] = device
        elif name == "--backend" and value:
            options.partitioner.backend = value
        elif name in ("--allow-op", "--deny-op") and value:
            (options.partitioner.allow_operators if name == "--allow-op" else
             options.partitioner.deny_operators).append(value)
        else:
            raise FerryError(f"unknown or malformed lowering option '{flag}' "
                             "(ferry lower --help lists them)",
                             exit_code=USAGE_EXIT)


def ferry_tool():
    """The built ferry tool: $FERRY_TOOL, <source tree>/build/bin/ferry, or
    ferry on PATH."""
    env = os.environ.get("FERRY_TOOL")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(here))))
    built = os.path.join(root, "build", "bin", "ferry")
    if os.access(built, os.X_OK):
        return built
    found = shutil.which("ferry")
    if found:
        return found
    raise FerryError("the ferry tool was not found (build it: cmake --build "
                     "build --target ferry; or set FERRY_TOOL)",
                     exit_code=USAGE_EXIT)


def _is_model(text):
    return text.startswith("torchvision:") or (".py:" in text and
                                               not os.path.isfile(text))


def _format_diagnostics(diagnostics, file):
    from ferry.proto import report_pb2
    out = ""
    for d in diagnostics:
        if d.source.file:
            out += f"{d.source.file}:"
            if d.source.line > 0:
                out += f"{d.source.line}:"
        else:
            out += f"{file}:"
        if d.method:
            out += f" method '{d.method}':"
        if d.nodes:
            out += f" node '{d.nodes[0]}':"
        severity = report_pb2.Severity.Name(d.severity).lower()
        out += f" {severity}[{d.code}]: {d.message}\n"
        if len(d.nodes) > 1:
            out += "  also:" + "".join(f" '{n}'" for n in d.nodes[1:]) + "\n"
        if d.hint:
            out += f"  hint: {d.hint}\n"
    return out


def lower_report_text(ok, diagnostics, stats, file):
    """The ferry tool's lower report (passes/pipeline.cc ReportText)."""
    out = ""
    if ok:
        out += f"{file}: lowered\n  delegates: {stats.delegates}"
        if stats.delegates_per_device:
            out += " (" + ", ".join(
                f"{k}: {v}"
                for k, v in sorted(stats.delegates_per_device.items())) + ")"
        out += (f"\n  copies per call: {stats.h2d_copies} H2D "
                f"({stats.h2d_bytes_per_call} B), {stats.d2h_copies} D2H "
                f"({stats.d2h_bytes_per_call} B)")
        if stats.load_time_copies:
            out += f"; {stats.load_time_copies} at load"
        for a in stats.arenas:
            out += (f"\n  arena {a.method} {a.device}: {a.bytes} B (lower "
                    f"bound {a.lower_bound_bytes} B)")
        out += "\n"
    else:
        errors = sum(1 for d in diagnostics if d.severity == 3)
        out += (f"{file}: did not lower ({errors} error"
                f"{'' if errors == 1 else 's'})\n")
    return out + _format_diagnostics(diagnostics, file)


def _number(v):
    import math
    return "nan" if math.isnan(v) else f"{v:.9g}"


def _index(index):
    return "(" + ", ".join(str(i) for i in index) + (",)" if len(index) == 1
                                                     else ")")


def verify_summary(report):
    """The ferry tool's verify report (runtime/verify.cc Text): the one-line
    summary, then each output."""
    text = report.summary + "\n"
    for c in report.outputs:
        text += (f"  {c.method} output {c.output_index} ({c.dtype}["
                 f"{','.join(str(s) for s in c.sizes)}]): ")
        if not c.match and c.first_mismatch_index < 0:
            text += "not compared\n"
        elif c.match:
            text += (f"match (greatest absolute difference "
                     f"{_number(c.max_abs_error)}, relative "
                     f"{_number(c.max_rel_error)}; atol {_number(c.atol)}, "
                     f"rtol {_number(c.rtol)})\n")
        else:
            percent = (100.0 * c.mismatched_elements / c.elements
                       if c.elements else 0.0)
            first = []
            n = c.first_mismatch_index
            for size in reversed(c.sizes):
                first.insert(0, n % size if size > 0 else 0)
                n = n // size if size > 0 else n
            text += (f"MISMATCH\n    Mismatched elements: "
                     f"{c.mismatched_elements} / {c.elements} ({percent:.1f}%)"
                     f"\n    Greatest absolute difference: "
                     f"{_number(c.max_abs_error)} at index "
                     f"{_index(c.max_abs_error_index)} (up to "
                     f"{_number(c.atol)} allowed)\n"
                     f"    Greatest relative difference: "
                     f"{_number(c.max_rel_error)} at index "
                     f"{_index(c.max_rel_error_index)} (up to "
                     f"{_number(c.rtol)} allowed)\n"
                     f"    First mismatch at index {_index(first)}: expected "
                     f"{_number(c.expected_value)}, got "
                     f"{_number(c.actual_value)}\n")
    return text


def _run_parser(command):
    p = _Parser(prog=f"ferry.torch {command}",
                description=f"{command.capitalize()} FILE (a Program or "
                "LowerRequest) or MODEL (exported first), in process with "
                "the ferry tool or on a ferryd (--server). Without delegation "
                "tags and without --partitioner, --partitioner=capability. "
                "Other options are the ferry tool's lowering options (ferry "
                f"{command} --help).")
    p.add_argument("target", metavar="FILE|MODEL")
    add_export_flags(p, with_output=False)
    add_remote_flags(p)
    p.add_argument("--allow-op", action="append", default=[], metavar="OP",
                   help="the capability partitioner claims only these "
                   "(repeatable)")
    p.add_argument("--deny-op", action="append", default=[], metavar="OP",
                   help="never claimed: stays on the host, e.g. aten::relu_ "
                   "(repeatable)")
    if command == "lower":
        p.add_argument("-o", "--output", metavar="OUT",
                       help="write the lowered program to OUT")
    else:
        p.add_argument("--device", choices=["auto", "sim", "cuda"],
                       default="sim", help="where the lowered program runs "
                       "(sim)")
        p.add_argument("--inputs", metavar="FILE",
                       help="an InputSet of input values (MODEL: its example "
                       "inputs)")
        p.add_argument("--verify-seed", type=int, default=0,
                       help="seed of inputs not given (0)")
    return p


def _prepare(command, argv):
    p = _run_parser(command)
    args, lowering = p.parse_known_args(argv)
    for flag in lowering:
        if not flag.startswith("--"):
            p.error(f"unexpected argument '{flag}'")
    inputs_set = None
    if _is_model(args.target):
        from ferry.torch import trace
        args.model = args.target
        program, inputs, _ = export_model(args)
        request = _request_for(program) if not _has_tags(program) else None
        if request is None:
            from ferry.proto import program_pb2 as pb
            request = pb.LowerRequest(program=program)
        inputs_set = trace.example_input_set(program, inputs)
        label = args.target
    else:
        request = read_request(args.target)
        if not _has_tags(request.program) and not request.HasField("options"):
            request.options.partitioner.kind = 1  # BY_CAPABILITY
        label = args.target
    if not any(f.startswith("--partitioner") for f in lowering) and (
            request.options.partitioner.kind == 1):
        lowering = ["--partitioner=capability"] + lowering
    lowering += [f"--allow-op={op}" for op in args.allow_op]
    lowering += [f"--deny-op={op}" for op in args.deny_op]
    if command == "verify" and args.inputs:
        from ferry.proto import program_pb2 as pb
        inputs_set = read_message(args.inputs, pb.InputSet)
    return args, lowering, request, inputs_set, label


def cmd_lower(argv):
    args, lowering, request, _, label = _prepare("lower", argv)
    if args.server:
        apply_lowering_flags(lowering, request.options)
        with connect(args) as client:
            response = client.lower(request)
        if response.ok and args.output:
            write_message(args.output, response.program)
        text = lower_report_text(response.ok, response.diagnostics,
                                 response.stats, label)
        if not response.ok:
            text += _sources_of(text, request.program)
        sys.stderr.write(text)
        return 0 if response.ok else 1
    with tempfile.TemporaryDirectory(prefix="ferry-torch-") as tmp:
        path = os.path.join(tmp, "request.binpb")
        write_message(path, request)
        out = args.output or os.path.join(tmp, "lowered.binpb")
        cmd = [ferry_tool(), "lower", "-o", out] + lowering + [path]
        return _run_tool(cmd, path, label, request.program)


def cmd_verify(argv):
    args, lowering, request, inputs_set, label = _prepare("verify", argv)
    if args.server:
        apply_lowering_flags(lowering, request.options)
        with connect(args) as client:
            response = client.verify(request,
                                     device=args.device,
                                     seed=args.verify_seed,
                                     inputs=inputs_set)
        if not response.lowered:
            text = lower_report_text(False, response.diagnostics,
                                     response.stats, label)
            sys.stderr.write(text + _sources_of(text, request.program))
            return 1
        text = verify_summary(response.report)
        sys.stdout.write(text + _sources_of(text, request.program))
        return 0 if response.report.ok else 1
    with tempfile.TemporaryDirectory(prefix="ferry-torch-") as tmp:
        path = os.path.join(tmp, "request.binpb")
        write_message(path, request)
        cmd = [ferry_tool(), "verify", f"--device={args.device}",
               f"--seed={args.verify_seed}"] + lowering
        if inputs_set is not None:
            inputs_path = os.path.join(tmp, "inputs.binpb")
            write_message(inputs_path, inputs_set)
            cmd += ["--inputs", inputs_path]
        return _run_tool(cmd + [path], path, label, request.program)


def _sources_of(text, program):
    """'  source: FILE:LINE (node N)' for each node an error line names,
    from the nodes' source locations (the model's own lines), unless the
    line already starts with it (diagnostics do; a runtime error does not)."""
    import re
    if "ERROR" not in text and "error" not in text:
        return ""
    sources = {}
    for m in program.methods:
        for n in m.nodes:
            if n.source.file:
                sources[n.name] = f"{n.source.file}:{n.source.line}"
    out = ""
    for name in dict.fromkeys(re.findall(r"node '([^']+)'", text)):
        if name in sources and f"{sources[name]}:" not in text:
            out += f"  source: {sources[name]} (node '{name}')\n"
    return out


def _run_tool(cmd, path, label, program=None):
    """Runs the ferry tool, printing its output with the temporary file's
    name replaced by what the user named, and the source lines of the nodes
    its errors name."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise FerryError(f"cannot run {cmd[0]}: {e.strerror}",
                         exit_code=USAGE_EXIT) from None
    stdout = done.stdout.replace(path, label)
    stderr = done.stderr.replace(path, label)
    if program is not None and done.returncode != 0:
        stdout += _sources_of(stdout, program)
        stderr += _sources_of(stderr, program)
    sys.stdout.write(stdout)
    sys.stderr.write(stderr)
    return done.returncode


COMMANDS = {"export": cmd_export, "lower": cmd_lower, "verify": cmd_verify}

USAGE = """usage: python3 -m ferry.torch COMMAND [options]

commands:
  export MODEL -o OUT   trace a PyTorch model into a ferry.v1.Program
  lower FILE|MODEL      lower it (in process, or --server ADDR)
  verify FILE|MODEL     lower, run and compare with eager host execution

MODEL is torchvision:NAME (weights=None) or path/module.py:ClassName.
'python3 -m ferry.torch COMMAND --help' for more (docs/frontend.md).
exit codes: 0 ok, 1 a model that cannot be expressed, compile errors or a
mismatch, 2 usage or unreadable input, 3 requested device not available
"""


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        (sys.stdout if argv else sys.stderr).write(USAGE)
        return 0 if argv else USAGE_EXIT
    command = COMMANDS.get(argv[0])
    if command is None:
        sys.stderr.write(f"ferry.torch: unknown command '{argv[0]}'\n\n"
                         f"{USAGE}")
        return USAGE_EXIT
    try:
        return command(argv[1:])
    except FerryError as e:
        sys.stderr.write(f"ferry.torch {argv[0]}: {e}\n")
        return e.exit_code
    except KeyboardInterrupt:
        return 130
