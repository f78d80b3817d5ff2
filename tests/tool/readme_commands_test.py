"""Runs the shell commands of the documentation as printed.

Every fenced block without a language (or marked sh, bash, shell) of
README.md is a command block, and so is every block of docs/*.md right after
a `<!-- runnable -->` line. A block right after `<!-- not-run: REASON -->`
is skipped; the skipped blocks are counted and must number exactly
--skipped (so that the markers cannot silently grow).

Each line of a block runs with bash in a scratch directory that links every
top-level entry of the source tree (and `build` to the build directory), in
order, so that a later line may read what an earlier one wrote. Before it
runs, `PORT` becomes the port of a ferryd the test started on 127.0.0.1.
A line that starts `build/bin/ferryd --listen` is that server, not run again.
A line fails when it exits non-zero, or prints a usage text, or does not
print what its comment says it prints (`# ... prints "TEXT"`).

    readme_commands_test.py SOURCE_DIR BUILD_DIR --skipped N
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

from loopback_ferryd import LoopbackFerryd

FENCE = re.compile(r"^```\s*(\w*)\s*$")
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(.+?)\s*-->\s*$")
RUNNABLE = re.compile(r"^<!--\s*runnable\s*-->\s*$")
PRINTS = re.compile(r'prints "([^"]+)"')
SHELL = {"", "sh", "bash", "shell"}


def blocks(path, every_block):
    """(first line number, lines, skip reason or None) of each command
    block of the markdown file at `path`."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    found = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        # The marker: the closest non-blank line above the fence.
        above = i - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        marker = lines[above] if above >= 0 else ""
        skip = NOT_RUN.match(marker)
        wanted = fence.group(1) in SHELL and (every_block or skip or
                                              RUNNABLE.match(marker))
        if wanted:
            found.append((i + 2, lines[i + 1:end],
                          skip.group(1) if skip else None))
        i = end + 1
    return found


def scratch_tree(source, build, where):
    for entry in os.listdir(source):
        if entry in ("build", ".git"):
            continue
        os.symlink(os.path.join(source, entry), os.path.join(where, entry))
    os.symlink(build, os.path.join(where, "build"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("build")
    parser.add_argument("--skipped", type=int, required=True)
    args = parser.parse_args()
    source = os.path.abspath(args.source)
    build = os.path.abspath(args.build)

    files = [(os.path.join(source, "README.md"), True)]
    files += [(path, False)
              for path in sorted(glob.glob(os.path.join(source, "docs",
                                                        "*.md")))]
    failures, skipped, ran = [], [], 0
    with tempfile.TemporaryDirectory() as tmp, \
            LoopbackFerryd(os.path.join(build, "bin", "ferryd")) as server:
        scratch_tree(source, build, tmp)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.join(source, "client", "python")
        env["FERRY_PYTHON_PROTO"] = os.path.join(build, "python")
        for path, every_block in files:
            name = os.path.relpath(path, source)
            for first, lines, reason in blocks(path, every_block):
                if reason is not None:
                    skipped.append(f"{name}:{first}: {reason}")
                    continue
                for offset, line in enumerate(lines):
                    command = line.strip()
                    if not command or command.startswith("#"):
                        continue
                    if command.startswith("build/bin/ferryd --listen"):
                        continue  # the server this test started
                    where = f"{name}:{first + offset}"
                    command = re.sub(r"\bPORT\b", server.port, command)
                    comment = command.split(" #", 1)[1] if " #" in command \
                        else ""
                    ran += 1
                    try:
                        done = subprocess.run(
                            ["bash", "-c", command], cwd=tmp, env=env,
                            capture_output=True, text=True, timeout=300)
                    except subprocess.TimeoutExpired:
                        failures.append(f"{where}: timed out: {command}")
                        continue
                    output = done.stdout + done.stderr
                    problem = None
                    if done.returncode != 0:
                        problem = f"exit {done.returncode}"
                    elif "usage:" in output:
                        problem = "printed a usage text"
                    else:
                        for wanted in PRINTS.findall(comment):
                            if wanted not in output:
                                problem = f'did not print "{wanted}"'
                    if problem:
                        failures.append(f"{where}: {problem}: {command}\n"
                                        f"{output[-2000:]}")
                    else:
                        print(f"ok   {where}: {command}")
    for line in skipped:
        print(f"skip {line}")
    if len(skipped) != args.skipped:
        failures.append(
            f"{len(skipped)} blocks are marked not-run, expected "
            f"{args.skipped}: run the new block in this test, or change "
            "--skipped in tests/tool/CMakeLists.txt on purpose")
    if ran == 0:
        failures.append("no command ran")
    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    print(f"{ran} commands ran, {len(skipped)} blocks skipped, "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
