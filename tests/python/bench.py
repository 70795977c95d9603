"""The Python binding's benchmark: draws per second from 32 threads (sync) and 32 asyncio
tasks against a hand-written pymongo `find_one_and_update({$inc})` counter, in one run on
one server, interleaved in rounds; with `--cli`, the Rust library's defaults at 32 tasks
(`dispenser bench`) in the same run. Every number drawn is checked for duplicates.

    tests/python/stage.sh --release
    cargo build --release                      # for --cli
    export "$(scripts/server.sh start)"
    DISPENSER_PYTHON_STAGE=target/python-release .tools/pyvenv/bin/python tests/python/bench.py \\
        --seconds 5 --rounds 3 --cli target/release/dispenser

Not a test: it prints figures (the guide's Python chapter has them) and exits 1 only on a
duplicate. What bounds the binding is shown by `blocks, 1 thread`: numbers handed out from
memory, so each call is the translation and the GIL's hand-off alone.
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

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, os.environ.get("DISPENSER_PYTHON_STAGE", str(ROOT / "target" / "python-release")))

import pymongo  # noqa: E402
from pymongo import ReturnDocument  # noqa: E402

import dispenser  # noqa: E402
import dispenser.aio  # noqa: E402

DATABASE = "dispenser_bench"


def threads_for(seconds: float, threads: int, call) -> list:
    """`threads` threads calling `call()` until `seconds` passed; every result."""
    out: list = []
    lock = threading.Lock()
    start = threading.Barrier(threads + 1)
    deadline = [0.0]

    def work():
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


def pymongo_counter(uri: str, collection: str, seconds: float, threads: int) -> list:
    client = pymongo.MongoClient(uri, maxPoolSize=threads + 4)
    coll = client[DATABASE][collection]
    name = f"c{time.time_ns()}"

    def call():
        doc = coll.find_one_and_update(
            {"_id": name}, {"$inc": {"n": 1}}, projection={"n": 1, "_id": 0},
            upsert=True, return_document=ReturnDocument.AFTER,
        )
        return doc["n"]

    try:
        return threads_for(seconds, threads, call)
    finally:
        client.close()


def dispenser_sync(d, seconds: float, threads: int) -> tuple[list, dict]:
    s = d.ensure(f"s{time.time_ns()}")
    return threads_for(seconds, threads, s.next), s.stats()


def dispenser_aio(uri: str, collection: str, seconds: float, tasks: int, loop: str):
    async def main():
        d = await dispenser.aio.Dispenser.connect(uri, database=DATABASE, collection=collection)
        s = await d.ensure(f"a{time.time_ns()}")
        end = time.monotonic() + seconds

        async def task():
            mine = []
            while time.monotonic() < end:
                mine.append(await s.next())
            return mine

        got = await asyncio.gather(*(task() for _ in range(tasks)))
        return [n for ns in got for n in ns], s.stats()

    if loop == "uvloop":
        import uvloop

        return uvloop.run(main())
    return asyncio.run(main())


def blocks_one_thread(d, seconds: float) -> list:
    name = f"b{time.time_ns()}"
    d.ensure(name)
    b = d.open_blocks(name, size=100_000)
    out = threads_for(seconds, 1, b.next)
    b.close()
    return out


def rust_cli(cli: str, uri: str, collection: str, seconds: float, tasks: int) -> float:
    r = subprocess.run(
        [cli, "--uri", uri, "--db", DATABASE, "--collection", collection, "bench",
         "--tasks", str(tasks), "--duration", str(seconds), "--count", "100000000", "--json"],
        capture_output=True, text=True, check=True,
    )
    runs = json.loads(r.stdout)["runs"]
    default = next(x for x in runs if x.get("default"))
    if default.get("duplicates"):
        raise SystemExit(f"dispenser bench found duplicates: {default}")
    return default["numbers_per_s"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--uri", default=os.environ.get("MONGODB_URI", "mongodb://127.0.0.1:27017"))
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=32)
    p.add_argument("--cli", help="the release `dispenser` binary, for the Rust library's figure")
    a = p.parse_args()
    collection = f"bench_{os.getpid()}_{time.time_ns() % 10**9}"
    d = dispenser.Dispenser.connect(a.uri, database=DATABASE, collection=collection)
    rates: dict[str, list[float]] = {}
    extra: dict[str, dict] = {}
    duplicates = 0

    def record(key: str, numbers: list, stats: dict | None = None):
        nonlocal duplicates
        dup = len(numbers) - len(set(numbers))
        duplicates += dup
        rates.setdefault(key, []).append(len(numbers) / a.seconds)
        if stats:
            extra[key] = {"numbers_per_write": round(stats["issued"] / max(stats["writes"], 1), 1)}
        print(f"  {key:<34} {len(numbers) / a.seconds:>11,.0f}/s  duplicates {dup}", flush=True)

    for r in range(a.rounds):
        print(f"round {r + 1} of {a.rounds}", flush=True)
        record(f"pymongo $inc counter, {a.threads} threads",
               pymongo_counter(a.uri, collection, a.seconds, a.threads))
        record(f"dispenser, {a.threads} threads", *dispenser_sync(d, a.seconds, a.threads))
        record(f"dispenser.aio, {a.threads} tasks",
               *dispenser_aio(a.uri, collection, a.seconds, a.threads, "asyncio"))
        record(f"dispenser.aio, {a.threads} tasks, uvloop",
               *dispenser_aio(a.uri, collection, a.seconds, a.threads, "uvloop"))
        record("dispenser blocks, 1 thread", blocks_one_thread(d, a.seconds))
        if a.cli:
            rates.setdefault(f"Rust library defaults, {a.threads} tasks", []).append(
                rust_cli(a.cli, a.uri, collection, a.seconds, a.threads)
            )
            print(f"  Rust library defaults: {rates[f'Rust library defaults, {a.threads} tasks'][-1]:,.0f}/s", flush=True)
    base = statistics.median(rates[f"pymongo $inc counter, {a.threads} threads"])
    rust = rates.get(f"Rust library defaults, {a.threads} tasks")
    print(f"\nmedian of {a.rounds} rounds of {a.seconds:g} s (numbers/s; ratios in this run)")
    print(f"{'':<38} {'numbers/s':>11} {'vs pymongo':>10} {'vs Rust':>8}  numbers/write")
    for key, values in rates.items():
        m = statistics.median(values)
        vs_rust = f"{m / statistics.median(rust):.2f}" if rust else "-"
        print(f"{key:<38} {m:>11,.0f} {m / base:>10.1f} {vs_rust:>8}  "
              f"{extra.get(key, {}).get('numbers_per_write', '')}")
    print(f"duplicates: {duplicates}")
    return 1 if duplicates else 0


if __name__ == "__main__":
    sys.exit(main())
