"""The Python binding's benchmark: draws per second from threads (`dispenser`) and from asyncio
tasks (`dispenser.aio`, on asyncio and on uvloop), each beside the raw driver call it is built
on — a `find_one_and_update({$inc})` counter with a projection, through pymongo's
`MongoClient` for threads and PyMongo's `AsyncMongoClient` for tasks — in one run on one
server, interleaved in rounds, at each number of callers of `--callers`. With `--rtt MS` the
database is MS of round trip away: every connection of the run goes through the core's delay
line (`dispenser bench --rtt MS --delay-line`, the binary of `--cli`). With `--cli`, the Rust
library's defaults (`dispenser bench`) at the same numbers of tasks, through the same line.
Every number drawn is checked for duplicates.

    tests/python/stage.sh --release && cargo build --release -p dispenser-cli
    export "$(scripts/server.sh start)"
    DISPENSER_PYTHON_STAGE=target/python-release .tools/pyvenv/bin/python tests/python/bench.py \\
        --seconds 4 --rounds 3 --callers 1,32,256 --rtt 2 --cli target/release/dispenser

Not a test: it prints figures (the guide's chapter on benchmarks at a round trip has them) and
exits 1 only on a duplicate. For each run: numbers per second, the ratio to the raw call of the
same flavour, callers and round, the p50 and p99 of a call, and for the dispenser's runs the
numbers per write (the handle's `stats()`: `issued / writes`) and the most callers one write
served (`max_batch`). The raw clients keep the driver's defaults (a pool of 100 connections).
`--blocks` adds `BlockSequence.next()` from one thread: numbers from memory, so each call is the
translation and the GIL's hand-off alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, os.environ.get("DISPENSER_PYTHON_STAGE", str(ROOT / "target" / "python-release")))

import pymongo  # noqa: E402
from pymongo import AsyncMongoClient, ReturnDocument  # noqa: E402

import dispenser  # noqa: E402
import dispenser.aio  # noqa: E402

DATABASE = "dispenser_bench"
FLAVOURS = ("threads", "asyncio", "uvloop")


@dataclass
class Run:
    """One phase: what each call returned and how long each took (ns)."""

    numbers: list[Any]
    latencies: list[int]
    seconds: float
    stats: Optional[dict[str, int]] = None
    # Figures a run reports itself (the Rust library's): p50, p99 (ms), ratio to its raw call.
    own: Optional[tuple[float, float, Optional[float]]] = None


@dataclass
class Row:
    """Every round of one (flavour, callers, what) cell."""

    rates: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    per_write: list[float] = field(default_factory=list)
    max_batch: list[int] = field(default_factory=list)
    duplicates: int = 0
    numbers: int = 0


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


def threads_for(seconds: float, threads: int, call: Callable[[], Any]) -> Run:
    """`threads` threads calling `call()` until `seconds` passed."""
    numbers: list[Any] = []
    latencies: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(threads + 1)
    deadline = [0.0]

    def work() -> None:
        mine, took = [], []
        start.wait()
        end = deadline[0]
        clock = time.perf_counter_ns
        while time.monotonic() < end:
            t0 = clock()
            mine.append(call())
            took.append(clock() - t0)
        with lock:
            numbers.extend(mine)
            latencies.extend(took)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    began = time.monotonic()
    deadline[0] = began + seconds
    start.wait()
    for t in pool:
        t.join()
    return Run(numbers, latencies, time.monotonic() - began)


async def tasks_for(seconds: float, tasks: int, call: Callable[[], Any]) -> Run:
    """`tasks` asyncio tasks awaiting `call()` until `seconds` passed."""
    began = time.monotonic()
    end = began + seconds
    clock = time.perf_counter_ns

    async def task() -> tuple[list[Any], list[int]]:
        mine, took = [], []
        while time.monotonic() < end:
            t0 = clock()
            mine.append(await call())
            took.append(clock() - t0)
        return mine, took

    got = await asyncio.gather(*(task() for _ in range(tasks)))
    return Run([n for ns, _ in got for n in ns], [t for _, ts in got for t in ts],
               time.monotonic() - began)


def counter_filter() -> tuple[dict[str, Any], dict[str, Any]]:
    return {"_id": f"c{time.time_ns()}"}, {"$inc": {"n": 1}}


def pymongo_counter(uri: str, collection: str, seconds: float, threads: int) -> Run:
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(uri)
    coll = client[DATABASE][collection]
    query, update = counter_filter()

    def call() -> Any:
        doc = coll.find_one_and_update(query, update, projection={"n": 1, "_id": 0},
                                       upsert=True, return_document=ReturnDocument.AFTER)
        return doc["n"] if doc else None

    try:
        call()  # the pool's first connection and the document, outside the clock
        return threads_for(seconds, threads, call)
    finally:
        client.close()


def since(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """A handle's counters over a phase (`max_batch` as it ended)."""
    d = {k: after[k] - before[k] for k in ("issued", "writes", "batches", "batched_calls")}
    d["max_batch"] = after["max_batch"]
    return d


def dispenser_threads(d: dispenser.Dispenser, seconds: float, threads: int) -> Run:
    s = d.ensure(f"s{time.time_ns()}")
    s.next()
    before = s.stats()
    run = threads_for(seconds, threads, s.next)
    run.stats = since(dict(before), dict(s.stats()))
    return run


def on_loop(flavour: str, main: Callable[[], Any]) -> Any:
    if flavour == "uvloop":
        import uvloop

        return uvloop.run(main())
    return asyncio.run(main())


def async_counter(uri: str, collection: str, seconds: float, tasks: int, flavour: str) -> Run:
    async def main() -> Run:
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri)
        coll = client[DATABASE][collection]
        query, update = counter_filter()

        async def call() -> Any:
            doc = await coll.find_one_and_update(query, update, projection={"n": 1, "_id": 0},
                                                 upsert=True,
                                                 return_document=ReturnDocument.AFTER)
            return doc["n"] if doc else None

        try:
            await call()
            return await tasks_for(seconds, tasks, call)
        finally:
            await client.close()

    return on_loop(flavour, main)


def dispenser_tasks(uri: str, collection: str, seconds: float, tasks: int, flavour: str) -> Run:
    async def main() -> Run:
        d = await dispenser.aio.Dispenser.connect(uri, database=DATABASE, collection=collection)
        try:
            s = await d.ensure(f"a{time.time_ns()}")
            await s.next()
            before = s.stats()
            run = await tasks_for(seconds, tasks, s.next)
            run.stats = since(dict(before), dict(s.stats()))
            return run
        finally:
            await d.close()

    return on_loop(flavour, main)


def blocks_one_thread(d: dispenser.Dispenser, seconds: float) -> Run:
    name = f"b{time.time_ns()}"
    d.ensure(name)
    b = d.open_blocks(name, size=100_000)
    try:
        return threads_for(seconds, 1, b.next)
    finally:
        b.close()


def rust_cli(cli: str, uri: str, collection: str, seconds: float, tasks: int) -> Run:
    r = subprocess.run(
        [cli, "--uri", uri, "--db", DATABASE, "--collection", collection, "bench",
         "--tasks", str(tasks), "--duration", str(seconds), "--count", "100000000",
         "--json"],
        capture_output=True, text=True, check=True,
    )
    runs = json.loads(r.stdout)["runs"]
    default = next(x for x in runs if x.get("default"))
    if default.get("duplicates"):
        raise SystemExit(f"dispenser bench found duplicates: {default}")
    count = round(default["numbers_per_s"] * default["seconds"])
    # Its own duplicate check ran above; these stand for its numbers in the tables.
    run = Run(list(range(count)), [], default["seconds"])
    run.own = (default["p50_us"] / 1000, default["p99_us"] / 1000, default.get("throughput_vs_raw"))
    if default.get("writes_per_number"):
        issued = 1_000_000
        run.stats = {"issued": issued, "writes": round(issued * default["writes_per_number"]),
                     "max_batch": 0}
    return run


def quantile(sorted_ns: list[int], q: float) -> float:
    if not sorted_ns:
        return float("nan")
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1e6


def span(values: list[float], fmt: str) -> str:
    """`lo–hi` over the rounds (one value when they agree)."""
    if not values:
        return "—"
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return lo if lo == hi else f"{lo}–{hi}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--uri", default=os.environ.get("MONGODB_URI", "mongodb://127.0.0.1:27017"))
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--callers", default="1,32,256",
                   help="numbers of concurrent callers, comma-separated (default 1,32,256)")
    p.add_argument("--threads", type=int, help="the same as --callers N (one number)")
    p.add_argument("--flavours", default=",".join(FLAVOURS),
                   help=f"which of {','.join(FLAVOURS)} to run (default all)")
    p.add_argument("--rtt", type=float, help="the round trip added by the delay line, in ms")
    p.add_argument("--cli", help="the `dispenser` binary: the delay line of --rtt, and the "
                                 "Rust library's figure")
    p.add_argument("--blocks", action="store_true", help="also BlockSequence.next(), 1 thread")
    a = p.parse_args()
    callers = [a.threads] if a.threads else [int(c) for c in a.callers.split(",")]
    flavours = [f for f in a.flavours.split(",") if f]
    for f in flavours:
        if f not in FLAVOURS:
            raise SystemExit(f"--flavours: {f!r} is not one of {', '.join(FLAVOURS)}")
    line = None
    uri = a.uri
    if a.rtt is not None:
        cli = a.cli or os.environ.get("DISPENSER_BIN") or str(ROOT / "target" / "release" / "dispenser")
        line, uri = delay_line(cli, a.uri, a.rtt)
    try:
        return bench(a, uri, callers, flavours)
    finally:
        if line is not None:
            assert line.stdin is not None
            line.stdin.close()
            line.wait()


def bench(a: argparse.Namespace, uri: str, callers: list[int], flavours: list[str]) -> int:
    collection = f"bench_{os.getpid()}_{time.time_ns() % 10**9}"
    d = dispenser.Dispenser.connect(uri, database=DATABASE, collection=collection)
    rows: dict[tuple[str, int, str], Row] = {}
    duplicates = 0
    raw_name = {"threads": "pymongo MongoClient $inc", "asyncio": "AsyncMongoClient $inc",
                "uvloop": "AsyncMongoClient $inc"}
    ours_name = {"threads": "dispenser", "asyncio": "dispenser.aio", "uvloop": "dispenser.aio"}

    def record(flavour: str, n: int, what: str, run: Run, raw: Optional[float]) -> float:
        nonlocal duplicates
        row = rows.setdefault((flavour, n, what), Row())
        dup = len(run.numbers) - len(set(run.numbers))
        duplicates += dup
        row.duplicates += dup
        row.numbers += len(run.numbers)
        rate = len(run.numbers) / run.seconds
        row.rates.append(rate)
        if run.own:
            p50, p99, vs_raw = run.own
            if vs_raw:
                row.ratios.append(vs_raw)
        else:
            if raw:
                row.ratios.append(rate / raw)
            lat = sorted(run.latencies)
            p50, p99 = quantile(lat, 0.5), quantile(lat, 0.99)
        row.p50.append(p50)
        row.p99.append(p99)
        extra = ""
        if run.stats and run.stats["writes"]:
            per_write = run.stats["issued"] / run.stats["writes"]
            row.per_write.append(per_write)
            extra = f"  {per_write:5.1f} numbers/write"
            if run.stats["max_batch"]:
                row.max_batch.append(run.stats["max_batch"])
                extra += f", at most {run.stats['max_batch']}"
        print(f"  {flavour:<8} {n:>4} {what:<26} {rate:>9,.0f}/s  p50 {p50:6.2f} ms  "
              f"p99 {p99:6.2f} ms  duplicates {dup}{extra}", flush=True)
        return rate

    for r in range(a.rounds):
        print(f"round {r + 1} of {a.rounds}", flush=True)
        for n in callers:
            for flavour in flavours:
                if flavour == "threads":
                    raw = record(flavour, n, raw_name[flavour],
                                 pymongo_counter(uri, collection, a.seconds, n), None)
                    record(flavour, n, ours_name[flavour],
                           dispenser_threads(d, a.seconds, n), raw)
                else:
                    raw = record(flavour, n, raw_name[flavour],
                                 async_counter(uri, collection, a.seconds, n, flavour), None)
                    record(flavour, n, ours_name[flavour],
                           dispenser_tasks(uri, collection, a.seconds, n, flavour), raw)
            if a.cli:
                run = rust_cli(a.cli, uri, collection, a.seconds, n)
                record("Rust", n, "Sequence::next() defaults", run, None)
        if a.blocks:
            record("threads", 1, "BlockSequence.next()", blocks_one_thread(d, a.seconds), None)
    d.close()

    where = f"{a.rtt:g} ms added by the delay line" if a.rtt is not None else "no delay line"
    print(f"\n{a.rounds} rounds of {a.seconds:g} s, {where}; ranges over the rounds, "
          f"ratios to the raw call of the same round")
    print("| flavour | callers | run | numbers/s | × raw | p50 | p99 | numbers per write | "
          "most per write |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (flavour, n, what), row in rows.items():
        ratio = span(row.ratios, ".2f") if row.ratios else "1" if "$inc" in what else "—"
        print(f"| {flavour} | {n} | {what} | {span(row.rates, ',.0f')} | {ratio} | "
              f"{span(row.p50, '.2f')} ms | {span(row.p99, '.2f')} ms | "
              f"{span(row.per_write, '.1f')} | {span([float(m) for m in row.max_batch], '.0f')} |")
    for (flavour, n, what), row in rows.items():
        if row.ratios and n == 1 and flavour in raw_name:
            raw_row = rows[(flavour, n, raw_name.get(flavour, ""))]
            p50s = [o / r for o, r in zip(row.p50, raw_row.p50)]
            print(f"{flavour}, 1 caller: p50 {span(p50s, '.2f')}× the raw call's")
    print(f"duplicates: {duplicates}")
    return 1 if duplicates else 0


if __name__ == "__main__":
    sys.exit(main())
