"""python3 -m ferry.torch: see ferry/torch/cli.py and docs/frontend.md."""
import sys

from ferry import FerryError

try:
    from ferry.torch.cli import main
except FerryError as e:  # torch or the generated modules are missing
    sys.stderr.write(f"ferry.torch: {e}\n")
    sys.exit(e.exit_code)

sys.exit(main())
