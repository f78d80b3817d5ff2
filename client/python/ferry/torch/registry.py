"""Which operators the Ferry registry knows, asked of the ferry tool.

A call carries its ATen schema only when the registry does not know its
operator: Ferry treats a node with its own schema as a custom operator
(checked from the schema, never delegated to a backend). The registry is
probed by running ``ferry check`` on a copy of the program with no schemas
and no weight data: every FERRY-E0110 (unknown operator) it reports names an
operator that needs its schema.
"""

import json
import os
import subprocess
import tempfile

from ferry import FerryError

UNKNOWN_OPERATOR = "FERRY-E0110"


def unknown_operators(program, tool):
    """The call operators of `program` that `tool`'s registry lacks."""
    probe = type(program)()
    probe.CopyFrom(program)
    for m in probe.methods:
        for n in m.nodes:
            if n.WhichOneof("kind") == "call":
                n.call.ClearField("schema")
    for c in probe.constants:
        if c.HasField("data"):
            c.ClearField("data")
            c.seed = 1
    with tempfile.TemporaryDirectory(prefix="ferry-torch-") as tmp:
        path = os.path.join(tmp, "probe.binpb")
        with open(path, "wb") as f:
            f.write(probe.SerializeToString())
        try:
            done = subprocess.run(
                [tool, "check", "--report=json", path],
                capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise FerryError(f"cannot run {tool} check: {e}",
                             exit_code=2) from None
    try:
        report = json.loads(done.stdout or "{}")
    except ValueError:
        raise FerryError(f"{tool} check printed no JSON diagnostics: "
                         f"{done.stderr.strip()}", exit_code=2) from None
    items = report.get("diagnostics", [])
    unknown = set()
    for d in items:
        if d.get("code") == UNKNOWN_OPERATOR:
            parts = d.get("message", "").split("'")
            if len(parts) >= 2:
                unknown.add(parts[1])
    return unknown


def keep_schemas_of(program, operators):
    """Drops the schema of every call whose operator is not in
    `operators`."""
    for m in program.methods:
        for n in m.nodes:
            if n.WhichOneof("kind") == "call" and n.call.op not in operators:
                n.call.ClearField("schema")
    return program
