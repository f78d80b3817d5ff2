#!/usr/bin/env python3
"""Compares Ferry's lowered programs, run on the GPU, with eager PyTorch on
the GPU. For each case: random inputs (numpy), `ferry verify --device=cuda
--inputs ... --dump-outputs ...` (which also checks against Ferry's own eager
host execution), then the same computation in PyTorch on cuda:0.

Usage: torch_compare.py FERRY_BINARY SOURCE_DIR      (needs torch; a GPU)
Exit 0 when every case matches within the tolerances printed.
"""
import base64
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

ferry, src = sys.argv[1], sys.argv[2]
dev = torch.device("cuda:0")
rng = np.random.default_rng(1234)


def value(method, name, array):
    return {"method": method, "input": name,
            "spec": {"dtype": "F32", "sizes": [str(s) for s in array.shape]},
            "data": base64.b64encode(array.astype("<f4").tobytes()).decode()}


def run_ferry(path, inputs):
    with tempfile.TemporaryDirectory() as tmp:
        inp = os.path.join(tmp, "in.json")
        out = os.path.join(tmp, "out.json")
        with open(inp, "w") as f:
            json.dump({"values": inputs}, f)
        r = subprocess.run([ferry, "verify", "--device=cuda", "--report=json",
                            "--inputs", inp, f"--dump-outputs={out}", path],
                           capture_output=True, text=True)
        print(r.stdout.strip()[:400])
        if r.returncode != 0:
            print(r.stderr)
            raise SystemExit(f"ferry verify failed on {path}: exit {r.returncode}")
        with open(out) as f:
            dumped = json.load(f)
    outs = []
    for v in dumped["values"]:
        shape = [int(s) for s in v["spec"].get("sizes", [])]
        outs.append(np.frombuffer(base64.b64decode(v["data"]), "<f4").reshape(shape))
    return outs


def t(a):
    return torch.tensor(a, device=dev)


failures = 0


def check(name, ferry_outs, torch_outs, atol=1e-4, rtol=1e-4):
    global failures
    for i, (f, p) in enumerate(zip(ferry_outs, torch_outs)):
        p = p.detach().cpu().numpy()
        err = float(np.max(np.abs(f - p))) if f.size else 0.0
        ok = np.allclose(f, p, atol=atol, rtol=rtol)
        print(f"{name} output {i}: max abs diff vs torch.cuda {err:.3g} -> {'OK' if ok else 'MISMATCH'}")
        failures += 0 if ok else 1


# B1: y = x @ w, w stored transposed ([4,3], strides [1,4]) with data 1..12.
x = rng.standard_normal((4, 4)).astype(np.float32)
outs = run_ferry(os.path.join(src, "examples/transposed_parameter.textproto"), [value("forward", "x", x)])
w_storage = torch.arange(1, 13, dtype=torch.float32, device=dev)
w = torch.as_strided(w_storage, (4, 3), (1, 4))
check("B1 transposed parameter", outs, [t(x) @ w])

# B2: u = relu_(a + b) + c with the relu_ on the host between two delegates.
a, b, c = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(3))
outs = run_ferry(os.path.join(src, "examples/host_relu_between_delegates.textproto"),
                 [value("forward", "a", a), value("forward", "b", b), value("forward", "c", c)])
tt = t(a) + t(b)
tt.relu_()
check("B2 host relu_ between delegates", outs, [tt + t(c)])

# A6: t = a + b; u = t + a; w = t + b; r = u + w.
a, b = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
outs = run_ferry(os.path.join(src, "tests/conformance/A6_shared_inputs/request.textproto"),
                 [value("forward", "a", a), value("forward", "b", b)])
tt = t(a) + t(b)
check("A6 shared inputs", outs, [(tt + t(a)) + (tt + t(b))])

# B4: t = a + b returned on the device (skip_d2h), and relu(t) from its D2H.
a, b = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
outs = run_ferry(os.path.join(src, "tests/conformance/B4_skip_outputs_with_host_reader/request.textproto"),
                 [value("forward", "a", a), value("forward", "b", b)])
tt = t(a) + t(b)
check("B4 skip_d2h with a host reader", outs, [tt, torch.relu(tt)])

# C2: x = sin(a); u = exp(x) on cuda; relu_(x) on the host; z = cos(x) on cuda.
a = rng.standard_normal((4, 4)).astype(np.float32)
outs = run_ferry(os.path.join(src, "tests/conformance/C2_copy_after_host_write/request.textproto"),
                 [value("forward", "a", a)])
xx = torch.sin(t(a))
u = torch.exp(xx)
xx.relu_()
check("C2 copy after host write", outs, [u, torch.cos(xx)])

print("torch", torch.__version__, "device", torch.cuda.get_device_name(0))
sys.exit(1 if failures else 0)
