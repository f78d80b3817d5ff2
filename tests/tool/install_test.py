"""`cmake --install` into a temporary prefix installs the interfaces a
client in any language needs (the .proto files, the gRPC service config),
the C++ client package and lower_example; the installed lower_example lowers
examples/two_delegates.textproto on a loopback ferryd, and prints its usage
(exit 2) without arguments.

    install_test.py SOURCE_DIR BUILD_DIR FERRYD
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from loopback_ferryd import LoopbackFerryd

SOURCE, BUILD, FERRYD = sys.argv[1:4]
del sys.argv[1:4]

PROTOS = ["ferry/v1/program.proto", "ferry/v1/report.proto",
          "ferry/v1/compiler.proto", "google/rpc/status.proto",
          "google/rpc/error_details.proto", "google/rpc/code.proto",
          "grpc/health/v1/health.proto"]


class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.prefix = os.path.join(cls.tmp.name, "prefix")
        done = subprocess.run(
            ["cmake", "--install", BUILD, "--prefix", cls.prefix],
            capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise AssertionError(f"cmake --install failed:\n{done.stderr}")
        cls.example = os.path.join(cls.prefix, "libexec", "ferry",
                                   "lower_example")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_protos_are_an_import_root(self):
        root = os.path.join(self.prefix, "share", "ferry", "proto")
        for proto in PROTOS:
            path = os.path.join(root, proto)
            self.assertTrue(os.path.isfile(path), path)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            # Every import resolves inside the installed root (or is one of
            # protobuf's own well-known types).
            for line in text.splitlines():
                if line.startswith("import "):
                    imported = line.split('"')[1]
                    if imported.startswith("google/protobuf/"):
                        continue
                    self.assertTrue(
                        os.path.isfile(os.path.join(root, imported)),
                        f"{proto} imports {imported}, not installed")

    def test_service_config_is_the_clients(self):
        path = os.path.join(self.prefix, "share", "ferry",
                            "service_config.json")
        with open(path, encoding="utf-8") as f:
            installed = json.load(f)
        with open(os.path.join(SOURCE, "client", "service_config.json"),
                  encoding="utf-8") as f:
            self.assertEqual(installed, json.load(f))
        policy = installed["methodConfig"][0]["retryPolicy"]
        self.assertIn("UNAVAILABLE", policy["retryableStatusCodes"])
        self.assertGreaterEqual(policy["maxAttempts"], 2)

    def test_client_package_is_installed(self):
        for path in ["include/ferry/client.h",
                     "share/ferry/examples/lower_example.cc",
                     "share/ferry/examples/CMakeLists.txt"]:
            self.assertTrue(
                os.path.isfile(os.path.join(self.prefix, path)), path)
        self.assertTrue(any(
            os.path.isfile(os.path.join(self.prefix, lib, "cmake",
                                        "FerryClient",
                                        "FerryClientConfig.cmake"))
            for lib in os.listdir(self.prefix) if lib.startswith("lib")))

    def test_lower_example_lowers_an_example(self):
        with LoopbackFerryd(FERRYD) as server:
            done = subprocess.run(
                [self.example, server.address,
                 os.path.join(SOURCE, "examples", "two_delegates.textproto")],
                capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("lowered, 3 H2D copies per call", done.stdout)

    def test_lower_example_usage(self):
        done = subprocess.run([self.example], capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(done.returncode, 2)
        self.assertIn("usage: lower_example HOST:PORT FILE", done.stderr)

    def test_lower_example_says_why_a_call_failed(self):
        # A file that is not a program: usage error, naming the file.
        readme = os.path.join(SOURCE, "README.md")
        done = subprocess.run([self.example, "127.0.0.1:1", readme],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 2)
        self.assertIn("README.md", done.stderr)
        # No server: the status code and message, exit 1.
        done = subprocess.run(
            [self.example, "127.0.0.1:1",
             os.path.join(SOURCE, "examples", "two_delegates.textproto")],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 1)
        self.assertIn("UNAVAILABLE", done.stderr)


if __name__ == "__main__":
    unittest.main()
