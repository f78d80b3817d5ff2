#!/usr/bin/python3
"""`ferry verify --device=sim` against PyTorch's eager CPU forward (issue 13,
"Host kernels near the machine").

For each model: export it once with the frontend (with weights and fixed
inputs, as bench/models_bench.py does), then, --runs times and interleaved
so that both sides see the same machine load:
  (a) PyTorch's own eager CPU forward of the same model and inputs
      (torch.no_grad, after one warm-up forward);
  (b) `ferry verify --partitioner=capability --device=sim` in process (the
      tool, with the exported inputs), reading the two execution steps it
      reports with --progress=always: `eager_run` (the original program on
      the host kernels) and `lowered_run` (the lowered program on the
      simulated device). Their sum is what a verification costs beyond
      loading; the tool's wall time (process start, reading the weights,
      lowering, loading) is printed too, for scale.
It prints p50 of each and the ratio (eager_run + lowered_run) / torch, whose
target is <= 3 (so ~1.5x per run).

Threads: both sides use the same number, --threads (default: what
torch.get_num_threads() says on this machine). PyTorch gets
torch.set_num_threads(N); the ferry tool gets OPENBLAS_NUM_THREADS=N in its
environment (its host kernels are single-threaded loops around OpenBLAS).
The OpenBLAS core type the tool ran on is printed (OPENBLAS_VERBOSE=2; the
runtime replaces the generic Prescott kernels OpenBLAS 0.3.21 falls back to
on CPUs it does not know, runtime/host_kernels_linalg.cc).

Usage (after scripts/setup or scripts/test built build/):
  bench/verify_vs_eager.py [--runs N] [--models resnet18,mobilenet_v2,vit_b_16]
                           [--threads N] [--ferry PATH] [--max-verify-bytes B]
--ferry runs another build's tool (default: build/bin/ferry), e.g. to compare
two builds on the same exported model. --max-verify-bytes passes the tool's
flag of that name: vit_b_16 needs 4GiB (its estimate is 2.6 GB).
"""
import argparse
import os
import shutil
import re
import statistics
import subprocess
import sys
import tempfile
import time

import models_bench  # bench/, next to this script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))
FERRY = os.path.join(ROOT, "build", "bin", "ferry")

# The same models and export arguments as the Lower benchmark (the models
# this one knows are the torchvision ones there).
MODELS = {name: spec for name, spec in models_bench.MODELS.items()
          if spec[0].startswith("torchvision:")}
STEP = re.compile(r"ferry verify: \S+: (eager_run|lowered_run) ([0-9.]+) ms")
CORE = re.compile(r"Core: (\S+)")


def run(cmd, env=None):
    done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                          timeout=900)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{done.stdout}{done.stderr}")
    return done


def ferry_verify(tool, path, inputs, env, limit=None):
    """One `ferry verify` on sim: (eager_run ms, lowered_run ms, wall ms,
    OpenBLAS core). `limit`: its --max-verify-bytes, where given."""
    start = time.perf_counter()
    extra = [f"--max-verify-bytes={limit}"] if limit else []
    done = run([tool, "verify", "--partitioner=capability", "--device=sim",
                "--progress=always", *extra, "--inputs", inputs, path], env)
    wall = (time.perf_counter() - start) * 1000
    steps = {name: float(ms) for name, ms in STEP.findall(done.stderr)}
    if set(steps) != {"eager_run", "lowered_run"}:
        sys.exit(f"no step timings in:\n{done.stderr}")
    cores = CORE.findall(done.stderr)
    return steps["eager_run"], steps["lowered_run"], wall, (
        cores[-1] if cores else "?")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--models", default="resnet18")
    parser.add_argument("--threads", type=int, default=0,
                        help="threads of both sides (default: "
                             "torch.get_num_threads())")
    parser.add_argument("--ferry", default=FERRY,
                        help="the ferry tool to run (default: %(default)s)")
    parser.add_argument("--max-verify-bytes",
                        help="ferry verify's limit (e.g. 4GiB: vit_b_16's "
                             "estimate is over the 2GiB default)")
    args = parser.parse_args()
    runs = max(1, min(args.runs, 100))
    import torch
    from ferry.torch import cli

    threads = args.threads if args.threads > 0 else torch.get_num_threads()
    torch.set_num_threads(threads)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads),
               OPENBLAS_VERBOSE="2")
    work = tempfile.mkdtemp(prefix="ferry-verify-vs-eager-")
    print(f"threads: {threads} (torch.set_num_threads, OPENBLAS_NUM_THREADS);"
          f" {runs} runs; ms, p50")
    print(f"{'model':14} {'torch eager':>12} {'ferry eager_run':>16}"
          f" {'lowered_run':>12} {'both':>8} {'ratio':>6} {'per run':>8}"
          f" {'verify wall':>12}  openblas")
    try:
        for name in args.models.split(","):
            spec = MODELS[name]
            path, inputs_path = models_bench.export_with_inputs(name, work)
            model, _ = cli.load_model(spec[0])
            model.eval()
            shapes = [cli.parse_input(spec[i + 1])
                      for i in range(1, len(spec), 2)]
            inputs = cli.make_inputs(shapes, 0)
            torch_ms, eager, lowered, both, wall = [], [], [], [], []
            core = "?"
            with torch.no_grad():
                model(*inputs)  # warm-up
                for _ in range(runs):
                    start = time.perf_counter()
                    model(*inputs)
                    torch_ms.append((time.perf_counter() - start) * 1000)
                    e, lo, w, core = ferry_verify(args.ferry, path, inputs_path,
                                                  env, args.max_verify_bytes)
                    eager.append(e)
                    lowered.append(lo)
                    both.append(e + lo)
                    wall.append(w)
            p50 = {k: statistics.median(v) for k, v in
                   (("torch", torch_ms), ("eager", eager), ("lowered", lowered),
                    ("both", both), ("wall", wall))}
            ratio = p50["both"] / p50["torch"]
            print(f"{name:14} {p50['torch']:>12.1f} {p50['eager']:>16.1f}"
                  f" {p50['lowered']:>12.1f} {p50['both']:>8.1f} {ratio:>6.2f}"
                  f" {ratio / 2:>8.2f} {p50['wall']:>12.0f}  {core}")

    finally:
        shutil.rmtree(work, ignore_errors=True)  # the exports


if __name__ == "__main__":
    main()
