"""Shared helpers of the frontend tests (run by ctest with /usr/bin/python3;
tests/python/CMakeLists.txt sets PYTHONPATH, FERRY_PYTHON_PROTO, FERRY_TOOL
and FERRYD)."""
import os
import subprocess
import sys

try:
    import torch  # noqa: F401 (a clear failure without it)
    import torchvision  # noqa: F401
except ImportError as e:
    raise RuntimeError(
        f"the frontend tests need Debian's python3-torch and "
        f"python3-torchvision ({e}); scripts/setup installs them "
        "(scripts/packages.txt)") from None

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = os.path.join(HERE, "models.py")
FERRY = os.environ.get("FERRY_TOOL", os.path.join(ROOT, "build", "bin",
                                                  "ferry"))
FERRYD = os.environ.get("FERRYD", os.path.join(ROOT, "build", "bin",
                                               "ferryd"))


def marker_line(tag):
    """The line of models.py carrying '# LINE:tag'."""
    with open(MODELS) as f:
        for i, line in enumerate(f, 1):
            if f"# LINE:{tag}" in line:
                return i
    raise AssertionError(f"no marker {tag}")


def run(cmd, timeout=300):
    return subprocess.run(cmd, capture_output=True, text=True,
                          timeout=timeout)


def frontend(*args, timeout=300):
    """python3 -m ferry.torch ARGS, with this interpreter."""
    return run([sys.executable, "-m", "ferry.torch", *args], timeout=timeout)


def ferry(*args, timeout=300):
    return run([FERRY, *args], timeout=timeout)
