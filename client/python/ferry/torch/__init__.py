"""The PyTorch frontend: torch.fx ATen graphs -> ferry.v1.Program.

    from ferry.torch import module_to_program
    program = module_to_program(model, (torch.randn(1, 3, 224, 224),))

Command line: ``python3 -m ferry.torch export|lower|verify`` (see
docs/frontend.md).
"""

try:
    import torch as _torch  # noqa: F401
except ImportError as _e:
    from ferry import FerryError as _FerryError
    raise _FerryError(f"the PyTorch frontend needs torch: {_e} (install "
                      "python3-torch)", exit_code=2) from None

from ferry.torch.convert import (BUFFER, CONSTANT, PARAMETER, USER_INPUT,
                                 InputInfo, graph_to_program, source_of,
                                 tensor_spec, written_roots)
from ferry.torch.trace import (example_input_set, exported_to_program,
                               has_torch_export, module_to_program,
                               trace_make_fx)

__all__ = [
    "BUFFER", "CONSTANT", "PARAMETER", "USER_INPUT", "InputInfo",
    "example_input_set", "exported_to_program", "graph_to_program",
    "has_torch_export", "module_to_program", "source_of", "tensor_spec",
    "trace_make_fx", "written_roots"
]
