"""Sequences from Python threads: the source documents' two tests, runs, the admin
operations, blocks, stripes, scopes and daily sequences."""

from __future__ import annotations

import collections
import threading

import pytest

import dispenser


def in_threads(threads: int, calls: int, draw) -> list[int]:
    """`threads` threads each calling `draw()` `calls` times, all started together."""
    out: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def work():
        mine = []
        start.wait()
        for _ in range(calls):
            mine.append(draw())
        with lock:
            out.extend(mine)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return out


def test_twenty_threads_times_a_hundred_calls_get_two_thousand_distinct_numbers(d):
    s = d.ensure("orders")
    numbers = in_threads(20, 100, s.next)
    assert len(numbers) == 2000
    assert sorted(numbers) == list(range(1, 2001))


def test_cyclic_max_99_gives_each_of_the_hundred_values_exactly_twenty_times(d):
    s = d.ensure("tickets", max=99, cycle=True)
    counts = collections.Counter(in_threads(20, 100, s.next))
    assert sorted(counts) == list(range(100))
    assert set(counts.values()) == {20}


def test_threads_drawing_from_one_handle_share_writes(d):
    # The GIL is released while a call waits: 32 threads' draws coalesce in the core.
    s = d.ensure("coalesced")
    numbers = in_threads(32, 50, s.next)
    assert len(set(numbers)) == 1600
    stats = s.stats()
    assert stats["issued"] == 1600
    assert stats["coalesced_calls"] > 0, stats
    assert stats["writes"] < 1600, stats


def test_a_run_is_a_range_and_a_cyclic_run_stops_at_the_wrap(d):
    s = d.create("runs", step=5, max=40, cycle=True)
    assert s.next_n(3) == range(1, 16, 5)
    assert list(s.next_n(10)) == [16, 21, 26, 31, 36]
    down = d.create("down", start=10, step=-3, min=-100)
    assert list(down.next_n(3)) == [10, 7, 4]


def test_admin_operations_on_a_sequence(d):
    s = d.create("admin")
    assert [s.next(), s.next()] == [1, 2]
    assert s.peek()["next"] == 3
    assert d.peek("admin")["value"] == 2
    assert s.advance_to(100)["next"] == 101
    with pytest.raises(dispenser.ConflictError) as e:
        s.reset(5)
    assert e.value.code == "would_go_backwards"
    assert s.reset(5, force=True)["next"] == 5
    assert s.next() == 5
    state = s.alter(max=9, cycle=True, force=True)
    assert (state["max"], state["cycle"]) == (9, True)
    assert s.alter(format="A-{n:03}")["format"] == "A-{n:03}"
    assert s.peek()["format"] == "A-{n:03}"
    assert s.alter(no_format=True)["format"] is None
    assert s.peek()["format"] is None
    names = [x["name"] for x in d.list()]
    assert names == ["admin"]
    assert [x["name"] for x in d.list(named=["admin", "missing"])] == ["admin"]
    assert [x["name"] for x in d.list(matching=["adm*"])] == ["admin"]
    assert [x["name"] for x in d.list(matching=["*"], after="admin", limit=5)] == []
    history = d.history("admin")
    assert [h["op"] for h in history][:2] == ["create", "advance-to"], history
    assert s.history(after=history[0]["cursor"], limit=1) == history[1:2]
    s.delete()
    with pytest.raises(dispenser.NotFoundError):
        d.open("admin")


def test_blocks_hand_out_distinct_numbers_across_clients(d):
    d.create("ids")
    a = d.open_blocks("ids", size=50)
    b = d.open("ids").into_blocks(size=30)
    numbers = in_threads(8, 100, a.next) + in_threads(8, 100, b.next)
    assert len(set(numbers)) == 1600
    assert a.held() >= 0 and a.block_size() >= 1
    report = a.close()
    assert set(report) == {"given_back", "lost"}
    assert a.is_closed()
    with pytest.raises(dispenser.UnavailableError) as e:
        a.next()
    assert e.value.code == "closed"


def test_striped_and_scoped_and_daily_sequences(d):
    st = d.ensure_striped("wide", 4)
    assert st.stripes == 4
    numbers = in_threads(8, 50, st.next)
    assert len(set(numbers)) == 400
    assert len(st.peek()) == 4
    blocks = st.with_blocks(size=10)
    more = in_threads(4, 50, blocks.next)
    assert not set(more) & set(numbers) and len(set(more)) == 200
    blocks.close()

    d.create("inv", max=999)
    acme = d.ensure_scope("inv", "acme")
    assert acme.name == "inv@acme"
    assert [acme.next(), acme.next()] == [1, 2]
    assert d.open_scope("inv", "acme").next() == 3
    assert [x["name"] for x in d.list(scopes_of="inv")] == ["inv@acme"]

    d.create("daily")
    day = d.open_daily("daily", "Europe/Paris")
    today = day.today()
    assert day.next() == (today, 1)
    assert day.next() == (today, 2)
    assert day.delete_scopes_before("2000-01-01") == 0
