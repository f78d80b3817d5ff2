"""ferry.Client and python3 -m ferry.torch --server against a real ferryd on
127.0.0.1 (started on port 0, stopped by its PID)."""
import os
import shutil
import subprocess
import tempfile
import unittest

import frontend_util as util
import models
import torch

import ferry
from ferry.torch import example_input_set, module_to_program


class Server:
    """A ferryd on 127.0.0.1:0; its address is stdout's first line."""

    def __init__(self, *flags):
        self.proc = subprocess.Popen(
            [util.FERRYD, "--listen", "127.0.0.1:0", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.address = self.proc.stdout.readline().strip()
        if not self.address:
            self.stop()
            raise AssertionError("ferryd printed no address")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.proc.stdout.close()


class ClientTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ferry-client-test-")
        cls.token = os.path.join(cls.tmp, "tokens")
        with open(cls.token, "w") as f:
            f.write("s3cret\n")
        # 1 MiB: small programs fit, a model with its weights does not.
        cls.server = Server("--max-message-bytes", "1048576")
        cls.secured = Server("--token-file", cls.token)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.secured.stop()
        shutil.rmtree(cls.tmp)

    def program(self):
        torch.manual_seed(0)
        x = torch.randn(2, 8)
        return module_to_program(models.LinearRelu(), [x],
                                 frontend="make_fx"), x

    def test_capabilities_lower_verify(self):
        program, x = self.program()
        with ferry.Client(self.server.address, deadline=120) as client:
            caps = client.capabilities()
            self.assertIn("sim", caps.devices)
            self.assertEqual(caps.limits.max_request_bytes, 1048576)
            lowered = client.lower(program)
            self.assertIsInstance(lowered, ferry.proto.compiler_pb2.LowerResponse)
            self.assertTrue(lowered.ok, lowered.diagnostics)
            self.assertEqual(len(lowered.program.methods), 1)
            verified = client.verify(program,
                                     device="sim",
                                     inputs=example_input_set(program, [x]))
            self.assertTrue(verified.ok, verified.report.summary)
            self.assertEqual(verified.report.device, "sim")
            self.assertTrue(verified.report.outputs[0].match)
            self.assertGreaterEqual(client.attempts, 3)

    def test_progress_streams_every_pass_then_the_result(self):
        program, _ = self.program()
        with ferry.Client(self.server.address, deadline=120) as client:
            passes = list(client.capabilities().passes)
            updates = []
            lowered = client.lower(program, bypass_cache=True,
                                   progress=updates.append)
            self.assertTrue(lowered.ok, lowered.diagnostics)
            self.assertTrue(updates)
            self.assertEqual([s.stage for s in updates[-1].finished], passes)
            steps = []
            verified = client.verify(program, device="sim",
                                     progress=steps.append)
            self.assertTrue(verified.ok, verified.report.summary)
            self.assertEqual(steps[-1].finished[-1].stage, "compare")

    def test_digest_computed_here_is_the_servers(self):
        # The documented digest (docs/service.md, "Request digests"),
        # computed in Python, finds what the C++ server cached.
        program, _ = self.program()
        request = ferry.proto.program_pb2.LowerRequest(program=program)
        request.options.partitioner.tag_targets["b"] = "cuda:1"
        request.options.partitioner.tag_targets["a"] = "cuda:0"
        with ferry.Client(self.server.address, deadline=120) as client:
            digest = client.request_digest(request)
            self.assertIsNone(client.lookup(digest))
            lowered = client.lower(request)
            self.assertEqual(lowered.request_digest, digest)
            found = client.lookup(digest)
            self.assertIsNotNone(found)
            self.assertTrue(found.cached)
            self.assertEqual(found.program, lowered.program)
            with self.assertRaises(ferry.ClientError) as bad:
                client.lookup("not-a-digest")
            self.assertEqual(bad.exception.code.name, "INVALID_ARGUMENT")

    def test_compile_error_is_a_response(self):
        program, _ = self.program()
        program.methods[0].nodes[-2].tensor.sizes[1] = 5  # wrong relu shape
        with ferry.Client(self.server.address) as client:
            response = client.lower(program)
        self.assertFalse(response.ok)
        self.assertTrue(any(d.severity == 3 for d in response.diagnostics))

    def test_request_over_the_message_limit(self):
        torch.manual_seed(0)
        big = module_to_program(models.SmallViT(), [torch.randn(1, 3, 32, 32)],
                                frontend="make_fx")
        weights = sum(len(c.data) for c in big.constants)
        self.assertLess(weights, 1 << 20)
        # Make it larger than the limit with a large parameter.
        c = big.constants[0]
        c.data = c.data * ((2 << 20) // max(len(c.data), 1) + 1)
        with ferry.Client(self.server.address) as client:
            with self.assertRaises(ferry.ClientError) as e:
                client.lower(big)
        self.assertEqual(e.exception.code.name, "RESOURCE_EXHAUSTED")
        self.assertIn("--no-weights", str(e.exception))
        # The client's own limit says so before sending.
        with ferry.Client(self.server.address,
                          max_message_bytes=1 << 20) as client:
            with self.assertRaises(ferry.ClientError) as e:
                client.lower(big)
        self.assertIn("over the client's message limit", str(e.exception))
        self.assertIn("--no-weights", str(e.exception))

    def test_token(self):
        program, _ = self.program()
        with ferry.Client(self.secured.address) as client:
            with self.assertRaises(ferry.ClientError) as e:
                client.lower(program)
        self.assertEqual(e.exception.code.name, "UNAUTHENTICATED")
        with ferry.Client(self.secured.address, token="s3cret") as client:
            self.assertTrue(client.lower(program).ok)
        with ferry.Client(self.secured.address,
                          token_file=self.token) as client:
            self.assertTrue(client.lower(program).ok)

    def test_unreachable_is_a_client_error(self):
        program, _ = self.program()
        with ferry.Client("127.0.0.1:1", deadline=2,
                          initial_backoff=0.05) as client:
            with self.assertRaises(ferry.ClientError) as e:
                client.lower(program)
        self.assertIn(e.exception.code.name,
                      ("UNAVAILABLE", "DEADLINE_EXCEEDED"))

    def test_cli_server_prints_the_tools_summary(self):
        model = f"{util.MODELS}:LinearRelu"
        out = os.path.join(self.tmp, "lr.binpb")
        done = util.frontend("export", model, "--input", "2,8", "-o", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        remote = util.frontend("lower", out, "--server", self.server.address)
        local = util.frontend("lower", out)
        self.assertEqual(remote.returncode, 0, remote.stderr)
        self.assertEqual(local.returncode, 0, local.stderr)
        self.assertEqual(remote.stderr, local.stderr)
        self.assertIn(f"{out}: lowered", remote.stderr)
        remote = util.frontend("verify", model, "--input", "2,8", "--server",
                               self.server.address)
        local = util.frontend("verify", model, "--input", "2,8")
        self.assertEqual(remote.returncode, 0, remote.stderr)
        self.assertEqual(local.returncode, 0, local.stderr)
        self.assertEqual(remote.stdout, local.stdout)
        self.assertIn("verify on sim: OK", remote.stdout)
        # resnet18 with its weights is over this server's 1 MiB limit.
        done = util.frontend("lower", "torchvision:resnet18", "--server",
                             self.server.address)
        self.assertEqual(done.returncode, 1)
        self.assertIn("--no-weights", done.stderr)
        self.assertNotIn("Traceback", done.stderr)
        done = util.frontend("lower", "torchvision:resnet18", "--no-weights",
                             "--server", self.server.address)
        self.assertEqual(done.returncode, 0, done.stderr)


def make_certificates(directory):
    """A CA, a server certificate for 127.0.0.1 and a client certificate,
    made with openssl (as tests/service/service_test_support.cc does)."""
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes"]

    def path(name):
        return os.path.join(directory, name)

    def run(*args):
        subprocess.run(["openssl", *args], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    run("req", "-x509", *curve, "-keyout", path("ca.key"), "-out",
        path("ca.pem"), "-days", "1", "-subj", "/CN=ferry-test-ca")
    for name, san in (("server", "DNS:localhost,IP:127.0.0.1"),
                      ("client", "DNS:ferry-test-client")):
        with open(path(f"{name}.ext"), "w") as f:
            f.write(f"subjectAltName={san}\n")
        run("req", *curve, "-keyout", path(f"{name}.key"), "-out",
            path(f"{name}.csr"), "-subj", f"/CN={name}")
        run("x509", "-req", "-in", path(f"{name}.csr"), "-CA", path("ca.pem"),
            "-CAkey", path("ca.key"), "-CAcreateserial", "-days", "1", "-out",
            path(f"{name}.pem"), "-extfile", path(f"{name}.ext"))
    return path


class TlsTest(unittest.TestCase):
    """mTLS: the server asks for a client certificate signed by the CA."""

    def test_mtls(self):
        with tempfile.TemporaryDirectory(prefix="ferry-tls-test-") as tmp:
            path = make_certificates(tmp)
            server = Server("--tls-cert", path("server.pem"), "--tls-key",
                            path("server.key"), "--tls-client-ca",
                            path("ca.pem"))
            try:
                torch.manual_seed(0)
                program = module_to_program(models.LinearRelu(),
                                            [torch.randn(2, 8)],
                                            frontend="make_fx")
                with ferry.Client(server.address, root_ca=path("ca.pem"),
                                  cert=path("client.pem"),
                                  key=path("client.key")) as client:
                    self.assertTrue(client.lower(program).ok)
                # Without a client certificate the handshake fails.
                with ferry.Client(server.address, root_ca=path("ca.pem"),
                                  deadline=5, max_attempts=1) as client:
                    with self.assertRaises(ferry.ClientError):
                        client.lower(program)
                # The CLI's TLS flags reach the same client.
                out = os.path.join(tmp, "lr.binpb")
                with open(out, "wb") as f:
                    f.write(program.SerializeToString())
                done = util.frontend("lower", out, "--server", server.address,
                                     "--tls-ca", path("ca.pem"), "--tls-cert",
                                     path("client.pem"), "--tls-key",
                                     path("client.key"))
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertIn("lowered", done.stderr)
            finally:
                server.stop()


if __name__ == "__main__":
    unittest.main()
