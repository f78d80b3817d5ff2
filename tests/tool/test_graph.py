"""`ferry lower --graph` and `ferry show --graph`, run as a user would: the
SVG Graphviz's dot draws is parsed as XML and must hold one cluster per
delegate device, the copy edges with their bytes, the legend and the marker
of a host write that forced a fresh copy; the summary view; remote and
in-process pictures are the same; no dot, a clear error.

Environment: FERRY_TOOL, FERRYD, FERRY_SOURCE_DIR (set by ctest)."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET

import graph_programs

FERRY = os.environ["FERRY_TOOL"]
FERRYD = os.environ["FERRYD"]
EXAMPLES = os.path.join(os.environ["FERRY_SOURCE_DIR"], "examples")
SVG = "{http://www.w3.org/2000/svg}"
HOST_RELU = os.path.join(EXAMPLES, "host_relu_between_delegates.textproto")


def ferry(*args, env=None, check=True):
    run = subprocess.run([FERRY, *args], capture_output=True, text=True,
                         timeout=300, env=env)
    if check and run.returncode != 0:
        raise AssertionError("ferry %s: exit %d\n%s%s" % (
            " ".join(args), run.returncode, run.stdout, run.stderr))
    return run


class Picture:
    """The groups of an SVG drawn by dot: clusters, nodes, edges."""

    def __init__(self, path):
        self.root = ET.parse(path).getroot()  # raises on malformed XML
        self.groups = []
        for g in self.root.iter(SVG + "g"):
            title = g.find(SVG + "title")
            self.groups.append({
                "id": g.get("id", ""),
                "class": g.get("class", "").split(),
                "title": title.text if title is not None else "",
                "text": "\n".join(t.text or "" for t in g.iter(SVG + "text")),
            })

    def of_class(self, cls):
        return [g for g in self.groups if cls in g["class"]]

    def titled(self, prefix, cls="cluster"):
        return [g for g in self.of_class(cls) if g["title"].startswith(prefix)]

    def by_id(self, ident):
        found = [g for g in self.groups if g["id"] == ident]
        return found[0] if found else None


class GraphTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ferry_graph_test_")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def check_host_relu(self, picture):
        devices = picture.titled("cluster_device:")
        self.assertEqual([g["title"] for g in devices], ["cluster_device:cuda:0"])
        self.assertEqual(len(picture.titled("cluster_delegate:")), 2)
        copies = picture.of_class("copy")
        self.assertEqual(len(copies), 6)  # a, b, c, t to cuda:0; t, u back
        for edge in copies:
            self.assertRegex(edge["text"], r"^(H2D|D2H) 64 B")
        self.assertEqual(len(picture.of_class("h2d")), 4)
        self.assertEqual(len(picture.of_class("d2h")), 2)
        forced = picture.by_id("copy:t_to_cuda0_v1")
        self.assertIn("fresh after host write 'r'", forced["text"])
        self.assertIsNotNone(picture.by_id("forced:t_to_cuda0_v1"))
        writers = picture.of_class("forcing-write")
        self.assertEqual([g["title"] for g in writers], ["r"])
        legend = picture.titled("cluster_legend")
        self.assertEqual(len(legend), 1)
        for entry in ("legend", "host (cpu)", "cuda:0", "H2D copy", "D2H copy",
                      "forced a fresh copy"):
            self.assertIn(entry, legend[0]["text"] + "\n".join(
                g["text"] for g in picture.titled("legend", "node")))

    def test_lower_draws_the_host_relu_example(self):
        ferry("lower", HOST_RELU, "-o", self.path("lowered.binpb"),
              "--graph=" + self.path("placement.svg"))
        self.check_host_relu(Picture(self.path("placement.svg")))
        # `show` draws the same picture from the lowered file.
        shown = ferry("show", self.path("lowered.binpb"),
                      "--graph=" + self.path("shown.svg"))
        self.check_host_relu(Picture(self.path("shown.svg")))
        self.assertIn("fresh copies forced by host writes: 1 "
                      "(t_to_cuda0_v1 after 'r')", shown.stdout)
        self.assertIn("copies per call: 4 H2D (256 B), 2 D2H (128 B)",
                      shown.stdout)
        self.assertIn("delegates: 2 (cuda:0: 2)", shown.stdout)
        self.assertIn("memory cuda:0: ", shown.stdout)

    def test_every_example_draws(self):
        for name in sorted(os.listdir(EXAMPLES)):
            with self.subTest(example=name):
                out = self.path(name + ".svg")
                run = ferry("lower", os.path.join(EXAMPLES, name), "-o",
                            self.path(name + ".binpb"), "--graph=" + out,
                            check=False)
                if run.returncode != 0:  # an example that shows an error
                    self.assertFalse(os.path.exists(out))
                    continue
                picture = Picture(out)
                self.assertEqual(len(picture.titled("cluster_legend")), 1)
                for edge in picture.of_class("copy"):
                    self.assertRegex(edge["text"], r"(H2D|D2H) (at load )?\d+")

    def test_remote_picture_is_the_in_process_one(self):
        server = subprocess.Popen([FERRYD, "--listen", "127.0.0.1:0"],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        try:
            address = server.stdout.readline().strip()
            self.assertRegex(address, r"^127\.0\.0\.1:\d+$")
            ferry("lower", "--server", address, HOST_RELU, "-o",
                  self.path("remote.binpb"), "--graph=" + self.path("remote.svg"))
            ferry("lower", "--server", address, HOST_RELU, "-o",
                  self.path("remote2.binpb"), "--graph=" + self.path("remote.dot"))
        finally:
            server.kill()  # by its PID
            server.wait(timeout=60)
            server.stdout.close()
        self.check_host_relu(Picture(self.path("remote.svg")))
        ferry("lower", HOST_RELU, "-o", self.path("local.binpb"),
              "--graph=" + self.path("local.dot"))
        with open(self.path("remote.dot")) as r, open(self.path("local.dot")) as l:
            self.assertEqual(r.read(), l.read())

    def test_a_300_node_program_is_drawn_in_full(self):
        k = 60
        program = self.write("chain.textproto", graph_programs.chain(k))
        ferry("lower", program, "-o", self.path("chain.binpb"),
              "--graph=" + self.path("chain.svg"))
        shown = ferry("show", self.path("chain.binpb")).stdout
        nodes = int(re.search(r"method forward: (\d+) nodes", shown).group(1))
        self.assertGreaterEqual(nodes, 290)
        self.assertLessEqual(nodes, 400)
        picture = Picture(self.path("chain.svg"))
        # Every node of the method drawn, plus the legend.
        self.assertEqual(len(picture.of_class("node")), nodes + 1)
        self.assertEqual(sorted(g["title"] for g in picture.titled("cluster_device:")),
                         ["cluster_device:cuda:0", "cluster_device:cuda:1"])
        self.assertEqual(len(picture.titled("cluster_delegate:")), k)
        copies = picture.of_class("copy")
        self.assertEqual(len(copies), len(picture.of_class("h2d")) +
                         len(picture.of_class("d2h")))
        for edge in copies:
            self.assertRegex(edge["text"], r"^(H2D|D2H) 64 B")
        forced = [g for g in copies if "fresh after host write" in g["text"]]
        self.assertEqual(len(forced), graph_programs.forced_copies(k))
        self.assertEqual(len(picture.of_class("forcing-write")),
                         graph_programs.forced_copies(k))
        self.assertIn("fresh copies forced by host writes: %d"
                      % graph_programs.forced_copies(k), shown)

    def test_large_methods_are_summarised(self):
        k = 100
        program = self.write("long.textproto", graph_programs.chain(k))
        ferry("lower", program, "--graph=" + self.path("long.svg"))
        picture = Picture(self.path("long.svg"))
        # One box per delegate, per host run (one between each pair), the
        # inputs and the output; the legend.
        boxes = [g["title"] for g in picture.of_class("node")]
        self.assertEqual(len([b for b in boxes if b.startswith("delegate:")]), k)
        self.assertEqual(len([b for b in boxes if b.startswith("host:")]), k)
        self.assertEqual(len(boxes), 2 * k + 3)
        self.assertEqual(sorted(g["title"] for g in picture.titled("cluster_device:")),
                         ["cluster_device:cuda:0", "cluster_device:cuda:1"])
        copies = picture.of_class("copy")
        self.assertTrue(copies)
        for edge in copies:
            self.assertRegex(edge["text"], r"^(H2D|D2H) x\d+, \d+ B")
        forced = [g for g in copies if "forced by host writes" in g["text"]]
        self.assertEqual(len(forced), graph_programs.forced_copies(k))
        self.assertIn("(summary)", "\n".join(g["text"] for g in picture.groups))

    def test_graph_summary_flag(self):
        ferry("lower", HOST_RELU, "--graph-summary", "--graph=" + self.path("s.svg"))
        picture = Picture(self.path("s.svg"))
        boxes = sorted(g["title"] for g in picture.of_class("node"))
        self.assertEqual(boxes, ["delegate:delegate_d0", "delegate:delegate_d1",
                                 "host:0", "inputs", "legend", "output"])
        self.assertEqual([g["title"] for g in picture.of_class("forcing-write")],
                         ["host:0"])

    def test_without_dot_svg_is_an_error_and_dot_text_still_works(self):
        env = dict(os.environ, PATH=self.dir)  # no dot on it
        run = ferry("lower", HOST_RELU, "-o", self.path("l.binpb"),
                    "--graph=" + self.path("p.svg"), env=env, check=False)
        self.assertEqual(run.returncode, 2)
        self.assertIn("'dot' is not on PATH", run.stderr)
        self.assertFalse(os.path.exists(self.path("p.svg")))
        self.assertFalse(os.path.exists(self.path("p.svg.partial")))
        ferry("lower", HOST_RELU, "--graph=" + self.path("p.dot"), env=env)
        with open(self.path("p.dot")) as f:
            self.assertTrue(f.read().startswith("digraph placement {"))

    def test_unknown_picture_format_is_a_usage_error(self):
        run = ferry("lower", HOST_RELU, "--graph=" + self.path("p.txt"),
                    check=False)
        self.assertEqual(run.returncode, 2)
        self.assertIn("--graph: OUT must end in", run.stderr)


if __name__ == "__main__":
    unittest.main()
