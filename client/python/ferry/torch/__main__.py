"""python3 -m ferry.torch: see ferry/torch/cli.py and docs/frontend.md."""
import sys

from ferry import FerryError
from ferry.torch import _MISSING

if _MISSING is not None:
    sys.stderr.write(f"ferry.torch: {_MISSING}\n")
    sys.exit(2)
try:
    from ferry.torch.cli import main
except FerryError as e:  # e.g. the generated modules are missing
    sys.stderr.write(f"ferry.torch: {e}\n")
    sys.exit(e.exit_code)

sys.exit(main())
