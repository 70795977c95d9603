"""dispenser.aio: the same calls awaited, under asyncio and uvloop, beside PyMongo's
AsyncMongoClient (and Motor, which also works); a sync call inside a running loop fails at
once with a clear error."""

from __future__ import annotations

import asyncio
import collections

import pytest

import dispenser
import dispenser.aio
from conftest import DATABASE, unique_collection


def run(main, loop: str):
    if loop == "uvloop":
        import uvloop

        return uvloop.run(main())
    return asyncio.run(main())


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_thousand_concurrent_tasks_get_a_thousand_distinct_numbers(uri, loop):
    async def main():
        d = await dispenser.aio.Dispenser.connect(
            uri, database=DATABASE, collection=unique_collection("aio_thousand")
        )
        s = await d.ensure("orders")
        numbers = await asyncio.gather(*(s.next() for _ in range(1000)))
        assert sorted(numbers) == list(range(1, 1001))
        stats = s.stats()
        assert stats["issued"] == 1000 and stats["writes"] < 1000, stats

    run(main, loop)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_twenty_tasks_times_a_hundred_on_a_cyclic_sequence(uri, loop):
    async def main():
        d = await dispenser.aio.Dispenser.connect(
            uri, database=DATABASE, collection=unique_collection("aio_cyclic")
        )
        s = await d.ensure("tickets", max=99, cycle=True)

        async def task():
            return [await s.next() for _ in range(100)]

        counts = collections.Counter(
            n for ns in await asyncio.gather(*(task() for _ in range(20))) for n in ns
        )
        assert sorted(counts) == list(range(100)) and set(counts.values()) == {20}

    run(main, loop)


def test_aio_errors_runs_and_handles(uri):
    async def main():
        d = await dispenser.aio.Dispenser.connect(
            uri, database=DATABASE, collection=unique_collection("aio_errors")
        )
        assert type(d) is dispenser.aio.Dispenser
        with pytest.raises(dispenser.NotFoundError) as e:
            await d.open("missing")
        assert e.value.code == "no_such_sequence"
        s = await d.create("r", step=2)
        assert type(s) is dispenser.aio.Sequence
        assert await s.next_n(3) == range(1, 7, 2)
        assert (await s.peek())["next"] == 7
        q = await d.ensure_queue("desk", max=9)
        t = await q.take()
        assert (await q.call(desk="A"))["ticket"] == t["ticket"]
        b = await d.open_blocks("r", size=10)
        assert await b.next() == 7
        assert (await b.close())["given_back"] == 9

    asyncio.run(main())


def test_a_sync_call_inside_a_running_loop_is_a_clear_error_not_a_deadlock(d):
    s = d.ensure("orders")

    async def main():
        with pytest.raises(RuntimeError) as e:
            s.next()
        assert "dispenser.aio" in str(e.value) and "event loop" in str(e.value)
        # The same call from a thread of the loop is fine.
        return await asyncio.to_thread(s.next)

    assert asyncio.run(main()) == 1


def test_an_aio_call_outside_a_loop_is_a_clear_error(uri):
    async def connect():
        return await dispenser.aio.Dispenser.connect(
            uri, database=DATABASE, collection=unique_collection("x")
        )

    d = asyncio.run(connect())
    with pytest.raises(RuntimeError) as e:
        d.open("x")
    assert "no running event loop" in str(e.value)


def test_cancelled_calls_leave_no_duplicate(uri):
    async def main():
        d = await dispenser.aio.Dispenser.connect(
            uri, database=DATABASE, collection=unique_collection("aio_cancel")
        )
        s = await d.ensure("c")
        tasks = [asyncio.ensure_future(s.next()) for _ in range(200)]
        for t in tasks[::3]:
            t.cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        got = [n for n in done if isinstance(n, int)]
        assert len(got) == len(set(got))
        assert sum(isinstance(x, asyncio.CancelledError) for x in done) > 0
        after = [await s.next() for _ in range(10)]
        assert not set(after) & set(got)

    asyncio.run(main())


@pytest.mark.parametrize(
    "loop,driver", [("asyncio", "pymongo"), ("uvloop", "pymongo"), ("asyncio", "motor")]
)
def test_aio_gapless_with_async_driver_inserts_some_failing_leaves_no_gap(uri, loop, driver):
    async def main():
        if driver == "motor":
            from motor.motor_asyncio import AsyncIOMotorClient as Client
        else:
            from pymongo import AsyncMongoClient as Client
        collection = unique_collection("aio_gapless")
        d = await dispenser.aio.Dispenser.connect(uri, database=DATABASE, collection=collection)
        business = f"{collection}_inv"
        g = await d.ensure_gapless("invoices", collection=business, field="number")
        coll = Client(uri)[DATABASE][business]

        async def issue(k: int):
            async def write(n: int):
                if k % 4 == 1:
                    raise RuntimeError("payment refused")
                await coll.insert_one({"number": n})
                return n

            try:
                return (await g.issue(write)).number
            except dispenser.BusinessWriteError as e:
                assert isinstance(e.__cause__, RuntimeError)
                return None

        got = await asyncio.gather(*(issue(k) for k in range(60)))
        used = sorted(n for n in got if n is not None)
        assert used == list(range(1, 46))
        await g.flush()
        audit = await d.audit(business, "number", from_=1)
        assert audit["clean"] and audit["numbers"] == 45 and audit["missing"] == 0, audit

    run(main, loop)
