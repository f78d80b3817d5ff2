"""python3 -m ferry.torch on real models (torchvision, random init, no
downloads) and its errors; the exported files go through the ferry tool."""
import json
import os
import shutil
import struct
import tempfile
import unittest

import frontend_util as util


def unknown_operators(path):
    done = util.ferry("check", "--report=json", path)
    report = json.loads(done.stdout)
    items = report["diagnostics"]
    return done.returncode, items


class CliTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ferry-cli-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def test_resnet18_export_check_lower(self):
        out = self.path("resnet18.binpb")
        done = util.frontend("export", "torchvision:resnet18", "-o", out,
                             "--inputs-out", self.path("in.binpb"))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("aten::convolution x20", done.stdout)
        self.assertIn("1 user_input", done.stdout)
        done = util.ferry("check", out)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        done = util.ferry("lower", "--partitioner=capability", "-o",
                          self.path("lowered.binpb"), out)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("lowered", done.stderr)
        # ferry verify reads the InputSet export wrote.
        done = util.ferry("verify", "--device=sim", "--partitioner=capability",
                          "--inputs", self.path("in.binpb"), out)
        self.assertNotEqual(done.returncode, 2, done.stderr)

    def test_missing_operators_per_model(self):
        """Exported without schemas, the four models check clean: the
        registry knows every operator they produce (anything missing would
        be a FERRY-E0110, listed here)."""
        cases = [
            ("resnet18", ["torchvision:resnet18"]),
            ("mobilenet_v2", ["torchvision:mobilenet_v2"]),
            ("SmallViT", [f"{util.MODELS}:SmallViT", "--input", "1,3,32,32"]),
            ("TinyGPT", [f"{util.MODELS}:TinyGPT", "--input", "2,8:int64"]),
        ]
        report = {}
        for name, args in cases:
            out = self.path(f"{name}.binpb")
            done = util.frontend("export", *args, "-o", out, "--no-weights",
                                 "--schemas=never")
            self.assertEqual(done.returncode, 0, done.stderr)
            rc, items = unknown_operators(out)
            errors = [d for d in items if d["severity"] == "ERROR"]
            for d in errors:
                self.assertEqual(d["code"], "FERRY-E0110", d)
            report[name] = sorted({d["message"].split("'")[1] for d in errors})
            # With the schemas (the default), the same program checks clean.
            done = util.frontend("export", *args, "-o", out, "--no-weights")
            self.assertEqual(done.returncode, 0, done.stderr)
            done = util.ferry("check", out)
            self.assertEqual(done.returncode, 0, done.stdout)
        print("\noperators the registry lacks:")
        for name, ops in report.items():
            print(f"  {name}: {', '.join(ops) or '-'}")
        # The catalogue covers every operator these models produce.
        self.assertEqual(report, {name: [] for name, _ in cases})

    def test_verify_against_pytorch(self):
        """Export with weights and inputs, ferry verify --inputs
        --dump-outputs, compare with PyTorch's eager outputs."""
        out = self.path("lr.binpb")
        done = util.frontend("export", f"{util.MODELS}:LinearRelu", "--input",
                             "2,8", "-o", out, "--inputs-out",
                             self.path("in.binpb"), "--reference-out",
                             self.path("ref.binpb"))
        self.assertEqual(done.returncode, 0, done.stderr)
        done = util.ferry("verify", "--device=sim", "--inputs",
                          self.path("in.binpb"),
                          "--dump-outputs=" + self.path("got.binpb"), out)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("verify on sim: OK", done.stdout)
        from ferry.proto import program_pb2 as pb
        got, ref = pb.InputSet(), pb.InputSet()
        got.ParseFromString(open(self.path("got.binpb"), "rb").read())
        ref.ParseFromString(open(self.path("ref.binpb"), "rb").read())
        a = struct.unpack(f"{len(got.values[0].data) // 4}f",
                          got.values[0].data)
        b = struct.unpack(f"{len(ref.values[0].data) // 4}f",
                          ref.values[0].data)
        self.assertEqual(len(a), 8)
        for x, y in zip(a, b):
            self.assertAlmostEqual(x, y, delta=1e-5 + 1e-5 * abs(y))

    def test_lower_and_verify_in_process(self):
        model = f"{util.MODELS}:LinearRelu"
        done = util.frontend("lower", model, "--input", "2,8")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(f"{model}: lowered", done.stderr)
        done = util.frontend("verify", model, "--input", "2,8")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("verify on sim: OK", done.stdout)

    def test_operator_without_kernel(self):
        model = f"{util.MODELS}:NoKernel"
        out = self.path("nk.binpb")
        done = util.frontend("export", model, "--input", "4", "-o", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(util.ferry("check", out).returncode, 0)
        done = util.frontend("lower", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        done = util.frontend("verify", model, "--input", "4")
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("node 'lgamma'", done.stdout)
        self.assertIn("aten::lgamma", done.stdout)
        self.assertIn(f"models.py:{util.marker_line('lgamma')} (node 'lgamma')",
                      done.stdout)
        # The ferry tool itself names the node's source line too.
        done = util.ferry("verify", "--device=sim", out)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("no kernel for operator aten::lgamma", done.stdout)
        self.assertIn(f"models.py:{util.marker_line('lgamma')})", done.stdout)

    # --- Errors: one line, the ferry tool's exit codes

    def assert_error(self, done, code, *words):
        self.assertEqual(done.returncode, code, done.stdout + done.stderr)
        self.assertNotIn("Traceback", done.stderr)
        self.assertEqual(len(done.stderr.strip().splitlines()), 1,
                         done.stderr)
        for w in words:
            self.assertIn(w, done.stderr)

    def test_errors(self):
        out = self.path("x.binpb")
        self.assert_error(
            util.frontend("export", f"{util.MODELS}:Quantized", "--input", "4",
                          "-o", out), 1, "quantize_per_tensor", "quantized",
            "models.py:")
        self.assert_error(
            util.frontend("export", f"{util.MODELS}:LinearRelu", "--input",
                          "2,8", "--dynamic", "-o", out), 1, "dynamic shape")
        self.assert_error(
            util.frontend("export", f"{util.MODELS}:Sparse", "--input", "4,4",
                          "-o", out), 1, "sparse")
        self.assert_error(
            util.frontend("export", f"{util.MODELS}:LinearRelu", "--input",
                          "2,x", "-o", out), 2, "SHAPE")
        self.assert_error(
            util.frontend("export", "torchvision:no_such_model", "-o", out), 2,
            "no_such_model")
        self.assert_error(
            util.frontend("export", f"{util.MODELS}:LinearRelu", "-o", out), 2,
            "--input")
        self.assert_error(util.frontend("lower", self.path("missing.binpb")),
                          2, "missing.binpb")
        import torch
        if not hasattr(torch, "export"):
            self.assert_error(
                util.frontend("export", "torchvision:resnet18",
                              "--frontend=export", "-o", out), 2,
                "torch.export is not available")


if __name__ == "__main__":
    unittest.main()
