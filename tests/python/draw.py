"""Draws numbers from one sequence with Python threads and prints them, one per line: the
Python part of the cross-language test (tests/python/test_cross_language.py), and a script
other languages' suites may spawn the same way.

    python tests/python/draw.py URI DATABASE COLLECTION NAME THREADS CALLS

It ensures NAME with the default spec, waits for a line on stdin when READY_FIRST=1 (so
that several processes start drawing together), then THREADS threads each call next()
CALLS times. Uses the package staged by tests/python/stage.sh (DISPENSER_PYTHON_STAGE, else
target/python-debug)."""

from __future__ import annotations

import os
import pathlib
import sys
import threading

ROOT = pathlib.Path(__file__).resolve().parents[2]
STAGE = os.environ.get("DISPENSER_PYTHON_STAGE", str(ROOT / "target" / "python-debug"))
if STAGE:  # empty: the package installed in this interpreter (tests/python/run.sh --installed)
    sys.path.insert(0, STAGE)

import dispenser  # noqa: E402


def main() -> None:
    uri, database, collection, name, threads, calls = sys.argv[1:7]
    d = dispenser.Dispenser.connect(uri, database=database, collection=collection)
    s = d.ensure(name)
    if os.environ.get("READY_FIRST") == "1":
        print("ready", flush=True)
        sys.stdin.readline()
    out: list[int] = []
    lock = threading.Lock()

    def work():
        mine = [s.next() for _ in range(int(calls))]
        with lock:
            out.extend(mine)

    pool = [threading.Thread(target=work) for _ in range(int(threads))]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    sys.stdout.write("".join(f"{n}\n" for n in out))


if __name__ == "__main__":
    main()
