"""A ferryd on 127.0.0.1, an ephemeral port, for the tests in tests/tool:
started from a given binary, its address read from its first stdout line,
stopped by its own PID."""

import os
import signal
import subprocess
import time


class LoopbackFerryd:
    def __init__(self, ferryd, timeout=30.0):
        self.process = subprocess.Popen(
            [ferryd, "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        # The first line of stdout is the chosen address (bounded wait: the
        # read ends when ferryd prints it or exits).
        deadline = time.monotonic() + timeout
        line = self.process.stdout.readline().strip()
        if not line or time.monotonic() > deadline:
            self.stop()
            raise RuntimeError(f"{ferryd} printed no address")
        self.address = line
        self.port = line.rsplit(":", 1)[1]

    def stop(self):
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
