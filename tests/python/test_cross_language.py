"""One sequence drawn at once by Python threads (in this process and another), the Rust
command line and Node.js promises, in separate processes: no number twice."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import threading

from conftest import DATABASE, ROOT

TARGET = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
CLI = TARGET / "debug" / "dispenser"
# The Node suite's drawing script, same arguments as draw.py (tests/node is the Node
# package's; the test draws with Node too when it is there).
NODE_DRAW = ROOT / "tests" / "node" / "draw.mjs"


def test_python_threads_node_promises_and_the_cli_in_separate_processes_never_share_a_number(
    uri, d, collection
):
    assert CLI.exists(), f"{CLI} is missing: build the command line first (cargo build)"
    s = d.ensure("shared")
    args = [uri, DATABASE, collection, "shared"]
    starters = [
        [sys.executable, str(ROOT / "tests/python/draw.py"), *args, "8", "50"],
        [sys.executable, str(ROOT / "tests/python/draw.py"), *args, "8", "50"],
    ]
    if NODE_DRAW.exists():
        # The installed package (tests/node/run.sh --installed), else the addon built in the checkout.
        built = os.environ.get("DISPENSER_NODE_PACKAGE") or list(
            (ROOT / "src" / "bindings" / "node").glob("dispenser.*.node")
        )
        assert shutil.which("node") and built, (
            "the Node.js addon is not built: run tests/node/build.sh (scripts/test.sh runs "
            "the Node.js suite, which builds it, before this one)"
        )
        starters.append(["node", str(NODE_DRAW), *args, "16", "25"])
    env = {**os.environ, "READY_FIRST": "1"}
    procs = [
        subprocess.Popen(c, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        for c in starters
    ]
    for p in procs:  # every process connected and ensured: start together
        assert p.stdout.readline().strip() == "ready"
    cli_out: list[str] = []

    def cli_loop():
        for _ in range(20):
            r = subprocess.run(
                [str(CLI), "--uri", uri, "--db", DATABASE, "--collection", collection,
                 "next", "shared", "--count", "3"],
                capture_output=True, text=True, timeout=60,
            )
            assert r.returncode == 0, r.stderr
            cli_out.extend(r.stdout.split())

    here: list[int] = []

    def python_thread():
        here.extend(s.next() for _ in range(50))

    workers = [threading.Thread(target=cli_loop) for _ in range(2)]
    workers += [threading.Thread(target=python_thread) for _ in range(4)]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for w in workers:
        w.start()
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for w in workers:
        w.join()
    assert all(p.returncode == 0 for p in procs)
    numbers = here + [int(x) for x in cli_out] + [int(x) for o in outs for x in o.split()]
    expected = 200 + 120 + 800 + (400 if len(procs) == 3 else 0)
    assert len(numbers) == expected
    assert len(set(numbers)) == expected, "a number was issued twice"
    assert sorted(numbers) == list(range(1, expected + 1))
