"""The Python suite: the package `dispenser` (staged by tests/python/stage.sh) against the
server in MONGODB_URI (scripts/test.sh starts one), each test in its own collection."""

from __future__ import annotations

import contextlib
import itertools
import os
import pathlib
import re
import sys
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
STAGE = os.environ.get("DISPENSER_PYTHON_STAGE", str(ROOT / "target" / "python-debug"))
if STAGE:  # empty: the package installed in this interpreter (tests/python/run.sh --installed)
    sys.path.insert(0, STAGE)

import dispenser  # noqa: E402

DATABASE = "dispenser_test"
_serial = itertools.count()


def unique_collection(hint: str) -> str:
    """A collection no other test (of this run or another) uses."""
    short = re.sub(r"[^A-Za-z0-9]+", "_", hint)[:40]
    return f"py_{short}_{os.getpid()}_{time.time_ns() % 10**9}_{next(_serial)}"


@pytest.fixture(scope="session")
def uri() -> str:
    value = os.environ.get("MONGODB_URI")
    if not value:
        pytest.fail(
            "MONGODB_URI is not set: run the Python tests through scripts/test.sh, which "
            "starts a local server (or export \"$(scripts/server.sh start)\")"
        )
    return value


@pytest.fixture
def collection(request) -> str:
    return unique_collection(request.node.name)


@pytest.fixture
def d(uri, collection):
    return dispenser.Dispenser.connect(uri, database=DATABASE, collection=collection)


@pytest.fixture
def mongo(uri):
    import pymongo

    client = pymongo.MongoClient(uri)
    yield client
    client.close()


@contextlib.contextmanager
def holding(g):
    """A holder of `g`'s next gap-free number that stalls in its business write while the
    block runs, then fails it (its number released): a live lease for the block."""
    held, stop = threading.Event(), threading.Event()

    def stalled(n: int):
        held.set()
        stop.wait(30)
        raise ValueError("holder gone")

    t = threading.Thread(target=lambda: pytest.raises(dispenser.BusinessWriteError, g.issue, stalled))
    t.start()
    try:
        assert held.wait(5), "the holder never took its number"
        yield
    finally:
        stop.set()
        t.join()
