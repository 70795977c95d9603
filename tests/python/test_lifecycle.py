"""What fits a Python app: with / async with and close() (block tails given back, later
calls refused), counts refused as InvalidInputError naming them, formatted draws, adopt,
the doctor's options, deleting a queue by its handle, and a sync gap-free write that runs
on the caller's own thread."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

import dispenser
import dispenser.aio
from conftest import DATABASE, unique_collection


def test_with_closes_the_dispenser_giving_block_tails_back_and_refusing_later_calls(uri, collection):
    with dispenser.Dispenser.connect(uri, database=DATABASE, collection=collection) as d:
        s = d.ensure("orders")
        with s.into_blocks(size=5, prefetch=None) as own:
            assert own.next() == 1
        assert own.is_closed()  # 2..5 given back
        b = d.open_blocks("orders", size=10, prefetch=None)
        assert b.next() == 2  # 2..11 reserved; 3..11 given back by the dispenser's close
    assert d.closed and b.is_closed()
    for call in (lambda: s.next(), lambda: b.next(), lambda: d.ensure("x"), lambda: d.peek("orders")):
        with pytest.raises(dispenser.UnavailableError) as e:
            call()
        assert e.value.code == "closed" and "closed" in str(e.value)
        assert e.value.written == "nothing_written"
    assert d.close() == {"given_back": 0, "lost": 0}  # closing again does nothing
    # The tails went back: the next draw continues right after the numbers handed out.
    again = dispenser.Dispenser.connect(uri, database=DATABASE, collection=collection)
    assert again.open("orders").next() == 3


def test_async_with_and_aclose(uri):
    async def main():
        collection = unique_collection("aclose")
        async with await dispenser.aio.Dispenser.connect(uri, database=DATABASE, collection=collection) as d:
            await d.ensure("o")
            async with await d.open_blocks("o", size=10, prefetch=None) as b:
                assert await b.next() == 1
            assert b.is_closed()
            other = await d.open_blocks("o", size=10, prefetch=None)
            assert await other.next() == 2
        assert d.closed
        with pytest.raises(dispenser.UnavailableError):
            await d.open("o")
        assert await d.aclose() == {"given_back": 0, "lost": 0}
        fresh = await dispenser.aio.Dispenser.connect(uri, database=DATABASE, collection=collection)
        assert await (await fresh.open("o")).next() == 3
        await fresh.aclose()

    asyncio.run(main())


def test_counts_and_sizes_out_of_range_are_invalid_input_naming_them(d):
    s = d.ensure("c")
    q = d.ensure_queue("q", max=9)
    cases = [
        (lambda: s.next_n(-1), "n", "-1"),
        (lambda: s.next_n(2**64), "n", str(2**64)),
        (lambda: q.take(count=-3), "count", "-3"),
        (lambda: d.open_blocks("c", size=-5), "size", "-5"),
        (lambda: s.into_blocks(grow_to=-1), "grow_to", "-1"),
        (lambda: d.create_striped("st", -2), "stripes", "-2"),
        (lambda: d.create_striped("st", 2**32), "stripes", str(2**32)),
        (lambda: d.list(limit=-1), "limit", "-1"),
        (lambda: s.history(limit=-1), "limit", "-1"),
        (lambda: d.doctor(tasks=-1), "tasks", "-1"),
    ]
    for call, what, value in cases:
        with pytest.raises(dispenser.InvalidInputError) as e:
            call()
        assert isinstance(e.value, ValueError)
        assert f"invalid {what}: {value}" in str(e.value), str(e.value)
        assert e.value.written == "nothing_written"
    with pytest.raises(TypeError):
        s.next_n("3")
    assert s.next() == 1  # nothing was drawn by the refused calls


def test_formatted_draws_and_formats(d):
    inv = d.create("inv", format="INV-{n:06}")
    assert inv.next_formatted() == "INV-000001"
    f = dispenser.Format("A-{scope}-{n:03}")
    assert f.uses_scope and f.render(7, "x") == "A-x-007" and str(f) == "A-{scope}-{n:03}"
    with pytest.raises(dispenser.InvalidInputError):
        f.render(7)
    with pytest.raises(dispenser.InvalidInputError):
        dispenser.Format("no placeholder")
    plain = d.create("plain")
    with pytest.raises(dispenser.InvalidInputError) as e:
        plain.next_formatted()
    assert "no format" in str(e.value)
    assert plain.next() == 1  # refused before anything was drawn
    d.create("t", format="{scope}-{n}")
    assert d.ensure_scope("t", "east").next_formatted() == "east-1"


def test_adopt_moves_past_a_counter_and_records_it(d, mongo, collection):
    counters = f"{collection}_counters"
    mongo[DATABASE][counters].insert_one({"_id": "invoice.number", "next": 41})
    source = dispenser.AdoptSource.mongoengine("invoice.number").in_collection(counters)
    assert (source.kind, source.collection, source.database, source.field) == (
        "counter", counters, None, "next")
    assert source == dispenser.AdoptSource.mongoengine("invoice.number").in_collection(counters)
    assert "AdoptSource.counter" in repr(source)
    s = d.ensure("invoices")
    done = d.adopt("invoices", source)
    assert [(a["name"], a["highest"], a["moved"]) for a in done] == [("invoices", 41, True)]
    assert done[0]["state"]["next"] == 42 and s.next() == 42
    assert s.adopt(source)[0]["moved"] is False  # never backwards
    with pytest.raises(dispenser.InvalidInputError):
        d.adopt("invoices", dispenser.AdoptSource.highest("", "n"))


def test_doctor_takes_the_options_node_has(d):
    report = d.doctor(tasks=2, increments=10, swaps=5, time_limit=5)
    assert report["fit"], report["reason"]
    assert report["probe"]["tasks"] == 2 and report["time_limit_seconds"] == 5
    assert report["probe"]["increments"]["planned"] == 20


def test_a_queue_handle_deletes_with_force(d):
    q = d.ensure_queue("lobby", max=9)
    q.take()
    with pytest.raises(dispenser.ConflictError) as e:
        q.delete()
    assert e.value.code == "queue_in_use"
    q.delete(force=True)
    with pytest.raises(dispenser.NotFoundError):
        d.open_queue("lobby")


def test_a_sync_gapless_write_runs_on_the_callers_thread_in_its_context(d, mongo, collection):
    business = mongo[DATABASE][f"{collection}_inv"]
    g = d.ensure_gapless("inv", collection=business.name, field="number")
    local = threading.local()
    request = contextvars.ContextVar("request")
    seen = []

    def work(k: int) -> None:
        local.name = f"thread-{k}"
        request.set(f"request-{k}")

        def write(n: int):
            seen.append((threading.current_thread().name, local.name, request.get()))
            business.insert_one({"number": n})
            return n

        g.issue(write)

    threads = [threading.Thread(target=work, args=(k,), name=f"thread-{k}") for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == [(f"thread-{k}", f"thread-{k}", f"request-{k}") for k in range(4)]
