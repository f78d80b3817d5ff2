#!/usr/bin/python3
"""Lower and Verify latency of the real models (issue 9, section 4).

For each model: export it once with the frontend (with weights, fixed
inputs), then
  - Lower in process: the pipeline's own time, the sum of the pass timings
    `ferry lower --report=json --timings` reports (import through plan_memory; no
    process start, no file reading);
  - Lower through the service: the wall time of `ferry.Client.lower` against
    a ferryd on 127.0.0.1 started here (result cache bypassed, so every call
    is computed; weights left out, as a Lower needs no numbers);
  - Verify through the service: `ferry.Client.verify` on sim with the
    exported inputs and the weights (eager run + sim run + comparison);
  - PyTorch's own eager CPU forward of the same model and inputs, for scale.
The Lowers are repeated --runs times (100 by default), Verify and the eager
forward --verify-runs times (5); p50 and p99 are printed in milliseconds,
p99 by nearest rank, so with fewer than 100 runs it is the maximum (the
header says how many runs each column had). Verify runs only for the models
in --verify-models: vit_b_16's weights (330 MB) are over ferryd's message
limit, and its Lower needs no weights.

Usage (after scripts/setup or scripts/test):
  bench/models_bench.py [--runs N] [--verify-runs N] [--models resnet18,...]
                        [--verify-models resnet18,...]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))
FERRY = os.path.join(ROOT, "build", "bin", "ferry")
FERRYD = os.path.join(ROOT, "build", "bin", "ferryd")
FRONTEND = os.path.join(ROOT, "scripts", "ferry-torch")
MODELS_PY = os.path.join(ROOT, "tests", "python", "models.py")

MODELS = {
    "resnet18": ["torchvision:resnet18", "--input", "1,3,224,224"],
    "mobilenet_v2": ["torchvision:mobilenet_v2", "--input", "1,3,224,224"],
    "vit_b_16": ["torchvision:vit_b_16", "--input", "1,3,224,224"],
    "SmallViT": [f"{MODELS_PY}:SmallViT", "--input", "1,3,32,32"],
    "TinyGPT": [f"{MODELS_PY}:TinyGPT", "--input", "2,8:int64"],
}


def percentiles(samples):
    """p50 and p99 by nearest rank (the maximum for fewer than 100)."""
    if not samples:
        return None
    ordered = sorted(samples)
    rank = max(1, -(-99 * len(ordered) // 100))  # ceil(0.99 n)
    return statistics.median(ordered), ordered[rank - 1]


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{done.stdout}{done.stderr}")
    return done


def export_with_inputs(name, work):
    """Exports model `name` with its weights and example inputs into `work`;
    returns the request's and the inputs' paths."""
    path = os.path.join(work, f"{name}.binpb")
    inputs = os.path.join(work, f"{name}.inputs.binpb")
    run([FRONTEND, "export", *MODELS[name], "-o", path, "--inputs-out", inputs])
    return path, inputs


def in_process_lower_ms(path):
    done = run([FERRY, "lower", "--partitioner=capability", "--report=json",
                "--timings",
                "-o", os.devnull, path])
    report = json.loads(done.stdout)
    # int64 fields are strings in protobuf's JSON mapping.
    return sum(int(p["micros"]) for p in report["stats"]["passes"]) / 1000.0


def eager_ms(spec, runs):
    import torch
    from ferry.torch import cli
    model, _ = cli.load_model(spec[0])
    shapes = [cli.parse_input(spec[i + 1]) for i in range(1, len(spec), 2)]
    inputs = cli.make_inputs(shapes, 0)
    model.eval()
    samples = []
    with torch.no_grad():
        model(*inputs)  # warm-up
        for _ in range(runs):
            start = time.perf_counter()
            model(*inputs)
            samples.append((time.perf_counter() - start) * 1000)
    return samples


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--verify-runs", type=int, default=5)
    parser.add_argument("--models",
                        default="resnet18,mobilenet_v2,vit_b_16,TinyGPT")
    parser.add_argument("--verify-models",
                        default="resnet18,mobilenet_v2,SmallViT,TinyGPT")
    args = parser.parse_args()
    runs = max(1, min(args.runs, 1000))
    verify_runs = max(1, min(args.verify_runs, 1000))
    verified_models = set(args.verify_models.split(","))
    from ferry import Client
    from ferry.torch import cli
    from ferry.proto import compiler_pb2, program_pb2

    work = tempfile.mkdtemp(prefix="ferry-models-bench-")
    ferryd = subprocess.Popen([FERRYD, "--listen", "127.0.0.1:0", "--workers", "1"],
                              stdout=subprocess.PIPE, text=True)
    try:
        address = ferryd.stdout.readline().strip()
        client = Client(address, deadline=600)
        print(f"{'model':14} {'nodes':>6} {'lower in-proc':>15} {'lower service':>15}"
              f" {'verify service':>15} {'torch eager':>15}   (ms, p50/p99;"
              f" lowers {runs} runs, verify and eager {verify_runs})")
        for name in args.models.split(","):
            spec = MODELS[name]
            nw = os.path.join(work, f"{name}.nw.binpb")
            run([FRONTEND, "export", *spec, "-o", nw, "--no-weights"])
            lower_request = cli.read_request(nw)
            lower_request.options.partitioner.kind = program_pb2.BY_CAPABILITY
            verify = None
            if name in verified_models:
                path, inputs = export_with_inputs(name, work)
                verify = compiler_pb2.VerifyRequest()
                verify.request.CopyFrom(cli.read_request(path))
                verify.request.options.partitioner.kind = program_pb2.BY_CAPABILITY
                verify.device = compiler_pb2.VERIFY_DEVICE_SIM
                verify.inputs.ParseFromString(open(inputs, "rb").read())
            nodes = sum(len(m.nodes) for m in lower_request.program.methods)

            local = [in_process_lower_ms(nw) for _ in range(runs)]
            remote, verified = [], []
            for _ in range(runs):
                start = time.perf_counter()
                response = client.lower(lower_request, bypass_cache=True)
                remote.append((time.perf_counter() - start) * 1000)
                if not response.ok:
                    sys.exit(f"{name}: lower failed: {response.diagnostics}")
            for _ in range(verify_runs if verify is not None else 0):
                start = time.perf_counter()
                response = client.verify(verify, bypass_cache=True)
                verified.append((time.perf_counter() - start) * 1000)
                if not response.ok:
                    sys.exit(f"{name}: verify failed: {response.report.summary}")
            eager = eager_ms(spec, verify_runs)
            cells = [percentiles(s) for s in (local, remote, verified, eager)]
            print(f"{name:14} {nodes:>6} " + " ".join(
                f"{c[0]:>7.1f}/{c[1]:<7.1f}" if c else f"{'-':>15}"
                for c in cells), flush=True)
    finally:
        ferryd.terminate()
        ferryd.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)  # the exports: ~350 MB each


if __name__ == "__main__":
    main()
