"""Ferry's Python package: a client of the Ferry compilation service and a
PyTorch frontend (``python3 -m ferry.torch``; docs/frontend.md).

The protobuf modules (``ferry.v1.program_pb2``, ``compiler_pb2``, ...) are
generated from ``proto/`` by the CMake build into ``<build>/python``; they are
never checked in. They are found, in this order, in the directory named by
the ``FERRY_PYTHON_PROTO`` environment variable, on ``sys.path``, and in the
``build/python`` directory of the source tree this package lives in.
"""

import os as _os
import sys as _sys

__all__ = ["Client", "ClientError", "FerryError", "proto_dir"]


class FerryError(Exception):
    """An error the frontend reports in one line (no traceback).

    ``exit_code`` follows the ``ferry`` tool: 1 for a program or model that
    cannot be expressed or does not compile, 2 for usage errors and
    unreadable input.
    """

    def __init__(self, message, exit_code=1, node=None):
        super().__init__(message)
        self.exit_code = exit_code
        self.node = node


def _find_proto_dir():
    candidates = []
    env = _os.environ.get("FERRY_PYTHON_PROTO")
    if env:
        candidates.append(env)
    candidates.extend(p for p in _sys.path if p)
    here = _os.path.dirname(_os.path.abspath(__file__))
    root = _os.path.dirname(_os.path.dirname(_os.path.dirname(here)))
    candidates.append(_os.path.join(root, "build", "python"))
    for directory in candidates:
        if _os.path.isfile(
                _os.path.join(directory, "ferry", "v1", "program_pb2.py")):
            return _os.path.abspath(directory)
    return None


def proto_dir():
    """The directory holding the generated modules, or raises FerryError."""
    directory = _find_proto_dir()
    if directory is None:
        raise FerryError(
            "the generated protobuf modules (ferry/v1/program_pb2.py) were not "
            "found: build them with 'cmake --build build --target "
            "ferry_python_proto' (scripts/setup does), or point "
            "FERRY_PYTHON_PROTO at the directory holding them",
            exit_code=2)
    return directory


_generated = _find_proto_dir()
if _generated is not None:
    # ferry.v1 (generated) lives beside this package; google.rpc needs the
    # generated root on sys.path (google is a namespace package).
    _portion = _os.path.join(_generated, "ferry")
    if _portion not in __path__:
        __path__.append(_portion)
    if _generated not in _sys.path:
        _sys.path.append(_generated)


def __getattr__(name):
    # Imported lazily: the converter does not need gRPC.
    if name in ("Client", "ClientError"):
        from ferry import client as _client
        return getattr(_client, name)
    raise AttributeError(f"module 'ferry' has no attribute {name!r}")
