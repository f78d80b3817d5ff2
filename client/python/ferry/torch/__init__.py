"""The PyTorch frontend: torch.fx ATen graphs -> ferry.v1.Program.

    from ferry.torch import module_to_program
    program = module_to_program(model, (torch.randn(1, 3, 224, 224),))

Command line: ``python3 -m ferry.torch export|lower|verify`` (see
docs/frontend.md).
"""

__all__ = [
    "BUFFER", "CONSTANT", "PARAMETER", "USER_INPUT", "InputInfo",
    "example_input_set", "exported_to_program", "graph_to_program",
    "has_torch_export", "module_to_program", "source_of", "tensor_spec",
    "trace_make_fx", "written_roots"
]

try:
    import torch  # noqa: F401
    del torch
    _MISSING = None
except ImportError as _e:
    # Reported as one line by `python3 -m ferry.torch` and as a FerryError
    # on first use (importing this package must work without torch: runpy
    # imports it before __main__).
    _MISSING = (f"the PyTorch frontend needs torch: {_e} (install "
                "python3-torch; use Debian's /usr/bin/python3)")

if _MISSING is None:
    from ferry import FerryError as _FerryError
    try:
        from ferry.torch.convert import (BUFFER, CONSTANT, PARAMETER,
                                         USER_INPUT, InputInfo,
                                         graph_to_program, source_of,
                                         tensor_spec, written_roots)
        from ferry.torch.trace import (example_input_set, exported_to_program,
                                       has_torch_export, module_to_program,
                                       trace_make_fx)
    except _FerryError as _e:  # the generated protobuf modules are missing
        _MISSING = str(_e)

if _MISSING is not None:

    def __getattr__(name):
        from ferry import FerryError
        if name in __all__:
            raise FerryError(_MISSING, exit_code=2)
        raise AttributeError(name)
