"""The type stubs and dispenser.types, checked by mypy --strict (mypy.ini) on a typed usage
file (typed_usage.py: clean, the package's own modules included) and on a file of mistakes
that each must be an error (a key misspelt, a field of the wrong type, a ticket family taken
as a ticket, an awaitable forgotten)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import dispenser
from conftest import ROOT

HERE = pathlib.Path(__file__).parent

MISTAKES = '''
import dispenser, dispenser.aio
d = dispenser.Dispenser.connect("mongodb://127.0.0.1")
print(d.ensure("o").peek()["nxt"])                          # MISTAKE typeddict-item
label: int = d.ensure_queue("q").take()["label"]             # MISTAKE assignment
waiting: int = d.ensure_queue("q").take(count=2)["waiting"]  # MISTAKE call-overload
async def f(a: dispenser.aio.Dispenser) -> int:
    return (await a.ensure("o")).next()                      # MISTAKE return-value
'''


def mypy(*files: pathlib.Path) -> subprocess.CompletedProcess[str]:
    package = pathlib.Path(dispenser.__file__).parent.parent
    env = dict(os.environ)
    # The checkout's staged package is found through MYPYPATH; an installed one (in
    # site-packages, which mypy refuses in MYPYPATH) through the interpreter, by its py.typed.
    if package.name not in ("site-packages", "dist-packages"):
        env["MYPYPATH"] = str(package)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(HERE / "mypy.ini"),
         "--no-error-summary", "--show-error-codes",
         "--cache-dir", str(ROOT / "target" / "mypy-cache"), *map(str, files)],
        capture_output=True, text=True, env=env, timeout=300,
    )


def test_mypy_strict_accepts_the_typed_usage_and_flags_each_mistake(tmp_path):
    mistakes = tmp_path / "mistakes.py"
    mistakes.write_text(MISTAKES)
    out = mypy(HERE / "typed_usage.py", mistakes)
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert not [e for e in errors if "typed_usage.py" in e or "dispenser/" in e], out.stdout
    expected = {
        (i, line.split("# MISTAKE ")[1].strip())
        for i, line in enumerate(MISTAKES.splitlines(), start=1)
        if "# MISTAKE" in line
    }
    found = {
        (int(e.split(":")[1]), e.rsplit("[", 1)[1].rstrip("]"))
        for e in errors
        if "mistakes.py" in e
    }
    assert found == expected, out.stdout
