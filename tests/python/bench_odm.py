"""The ODM fields' benchmark: saves per second of mongoengine documents from threads (and of
Beanie documents from asyncio tasks) numbered by dispenser's SequenceField, beside the same
saves numbered by mongoengine's own SequenceField and the same saves without numbering, in
one run on one server, interleaved in rounds; with ``--rtt MS`` through the core's delay line
(``dispenser bench --rtt MS --delay-line``), so the database is MS of round trip away.
Every number the dispenser fields gave is checked for duplicates.

    tests/python/stage.sh --release && cargo build
    export "$(scripts/server.sh start)"
    DISPENSER_PYTHON_STAGE=target/python-release .tools/pyvenv/bin/python tests/python/bench_odm.py \\
        --seconds 4 --rounds 3 --rtt 2 --cli target/debug/dispenser

Not a test: it prints figures (the guide's Python chapter has them) and exits 1 only on a
duplicate. mongoengine's own SequenceField is not checked: on the local test server its
findAndModify without a projection returns wrong values under concurrency (a quirk of that
server, see the shared notes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Optional

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, os.environ.get("DISPENSER_PYTHON_STAGE", str(ROOT / "target" / "python-release")))

import mongoengine  # noqa: E402
from mongoengine.connection import disconnect  # noqa: E402

import dispenser  # noqa: E402
import dispenser.aio  # noqa: E402
import dispenser.beanie  # noqa: E402
import dispenser.mongoengine  # noqa: E402

DATABASE = "dispenser_bench_odm"


def delay_line(cli: str, uri: str, rtt: float) -> tuple[subprocess.Popen[str], str]:
    """The core's delay line in front of `uri`: (its process, the URI through it)."""
    p = subprocess.Popen(
        [cli, "--uri", uri, "bench", "--rtt", str(rtt), "--delay-line"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert p.stdout is not None
    first = p.stdout.readline().strip()
    if not first.startswith("MONGODB_URI="):
        raise SystemExit(f"the delay line printed {first!r}")
    return p, first.split("=", 1)[1]


def threads_for(seconds: float, threads: int, call: Callable[[], Any]) -> list[Any]:
    """`threads` threads calling `call()` until `seconds` passed; every result."""
    out: list[Any] = []
    lock = threading.Lock()
    start = threading.Barrier(threads + 1)
    deadline = [0.0]

    def work() -> None:
        mine = []
        start.wait()
        end = deadline[0]
        while time.monotonic() < end:
            mine.append(call())
        with lock:
            out.extend(mine)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    deadline[0] = time.monotonic() + seconds
    start.wait()
    for t in pool:
        t.join()
    return out


def mongoengine_model(kind: str, alias: str, collection: str, d: dispenser.Dispenser) -> Any:
    fields: dict[str, Any] = {"customer": mongoengine.StringField()}
    if kind == "mongoengine SequenceField":
        fields["number"] = mongoengine.SequenceField(db_alias=alias)
    elif kind == "dispenser SequenceField":
        fields["number"] = dispenser.mongoengine.SequenceField(db_alias=alias, dispenser=d)
    elif kind == "dispenser SequenceField(block=None)":
        fields["number"] = dispenser.mongoengine.SequenceField(db_alias=alias, dispenser=d, block=None)
    elif kind == "dispenser SequenceField(gapless=True)":
        fields["number"] = dispenser.mongoengine.SequenceField(db_alias=alias, dispenser=d, gapless=True)
    fields["meta"] = {"collection": collection, "db_alias": alias}
    return type(f"Doc_{collection}", (mongoengine.Document,), fields)


MONGOENGINE = [
    "no numbering",
    "mongoengine SequenceField",
    "dispenser SequenceField",
    "dispenser SequenceField(block=None)",
    "dispenser SequenceField(gapless=True)",
]
BEANIE = ["no numbering", "dispenser SequenceField", "dispenser SequenceField(block=None)"]


def mongoengine_saves(uri: str, kind: str, seconds: float, threads: int, tag: str) -> list[Any]:
    alias = f"a{tag}"
    mongoengine.connect(db=DATABASE, host=uri, alias=alias, uuidRepresentation="standard",
                        maxPoolSize=threads + 8)
    d = dispenser.Dispenser.connect(uri, database=DATABASE, collection=f"seq_{tag}")
    try:
        cls = mongoengine_model(kind, alias, f"docs_{tag}", d)
        cls(customer="warm-up").save()  # the field's first use: ensure, adopt, check
        return threads_for(seconds, threads, lambda: getattr(cls(customer="c").save(), "number", None))
    finally:
        d.close()
        disconnect(alias=alias)


def beanie_model(kind: str, d: Any, collection: str) -> Any:
    from beanie import Document

    if kind == "no numbering":

        class Plain(Document):
            customer: str = ""

            class Settings:
                name = collection

        return Plain
    options: dict[str, Any] = {"block": None} if "block=None" in kind else {}

    class Numbered(dispenser.beanie.Numbered, Document):
        number: Optional[int] = dispenser.beanie.SequenceField(dispenser=d, **options)
        customer: str = ""

        class Settings:
            name = collection

    return Numbered


def beanie_inserts(uri: str, kind: str, seconds: float, tasks: int, tag: str) -> list[Any]:
    from beanie import init_beanie
    from pymongo import AsyncMongoClient

    async def main() -> list[Any]:
        client: Any = AsyncMongoClient(uri, maxPoolSize=tasks + 8)
        d = await dispenser.aio.Dispenser.connect(uri, database=DATABASE, collection=f"seq_{tag}")
        cls: Any = beanie_model(kind, d, f"bdocs_{tag}")
        await init_beanie(database=client[DATABASE], document_models=[cls])
        await cls(customer="warm-up").insert()
        end = time.monotonic() + seconds

        async def task() -> list[Any]:
            mine = []
            while time.monotonic() < end:
                doc = await cls(customer="c").insert()
                mine.append(getattr(doc, "number", None))
            return mine

        got = await asyncio.gather(*(task() for _ in range(tasks)))
        await d.aclose()
        await client.close()
        return [n for ns_ in got for n in ns_]

    return asyncio.run(main())


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--uri", default=os.environ.get("MONGODB_URI", "mongodb://127.0.0.1:27017"))
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=16, help="threads (mongoengine) and tasks (Beanie)")
    p.add_argument("--rtt", type=float, help="round trip to put the database at, in ms (needs --cli)")
    p.add_argument("--cli", default=str(ROOT / "target" / "debug" / "dispenser"),
                   help="the `dispenser` binary whose delay line gives --rtt")
    p.add_argument("--no-beanie", action="store_true")
    a = p.parse_args()
    places = [("local", a.uri, None)]
    if a.rtt is not None:
        line, through = delay_line(a.cli, a.uri, a.rtt)
        places.append((f"{a.rtt:g} ms", through, line))
    rates: dict[tuple[str, str, str], list[float]] = {}
    duplicates = 0
    try:
        for r in range(a.rounds):
            print(f"round {r + 1} of {a.rounds}", flush=True)
            for place, uri, _ in places:
                runs: list[tuple[str, str, Callable[[str], list[Any]]]] = [
                    ("mongoengine", k, lambda tag, k=k: mongoengine_saves(uri, k, a.seconds, a.threads, tag))
                    for k in MONGOENGINE
                ]
                if not a.no_beanie:
                    runs += [
                        ("beanie", k, lambda tag, k=k: beanie_inserts(uri, k, a.seconds, a.threads, tag))
                        for k in BEANIE
                    ]
                for odm, kind, run in runs:
                    tag = f"{os.getpid()}_{time.time_ns() % 10**10}"
                    numbers = run(tag)
                    checked = kind.startswith("dispenser")
                    dup = len(numbers) - len(set(numbers)) if checked else 0
                    duplicates += dup
                    rate = len(numbers) / a.seconds
                    rates.setdefault((place, odm, kind), []).append(rate)
                    print(f"  {place:>6} {odm:<11} {kind:<38} {rate:>9,.0f} saves/s"
                          + (f"  duplicates {dup}" if checked else ""), flush=True)
    finally:
        for _, _, line in places:
            if line is not None and line.stdin is not None:
                line.stdin.close()
                line.wait(10)
    print(f"\nmedian of {a.rounds} rounds of {a.seconds:g} s, {a.threads} threads (mongoengine) / "
          f"tasks (Beanie); ratios to the same saves without numbering, in this run")
    print(f"{'where':>6} {'ODM':<11} {'field':<38} {'saves/s':>9} {'ratio':>6}")
    for (place, odm, kind), values in rates.items():
        base = statistics.median(rates[(place, odm, "no numbering")])
        m = statistics.median(values)
        print(f"{place:>6} {odm:<11} {kind:<38} {m:>9,.0f} {m / base:>6.2f}")
    print(f"duplicates: {duplicates}")
    return 1 if duplicates else 0


if __name__ == "__main__":
    sys.exit(main())
