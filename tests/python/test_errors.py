"""Errors: one class per kind of the core's errors, each with the core's stable code;
invalid input refused before anything is written."""

from __future__ import annotations

import pickle

import pytest

import dispenser
from conftest import DATABASE, holding


def test_each_kind_is_its_own_class_with_the_stable_code(d):
    d.create("e")
    cases = [
        (lambda: d.open("missing"), dispenser.NotFoundError, "no_such_sequence", "not_found"),
        (lambda: d.create("e"), dispenser.AlreadyExistsError, "already_exists", "already_exists"),
        (lambda: d.ensure("e", start=2), dispenser.ConflictError, "spec_conflict", "conflict"),
        (lambda: d.create("bad", step=0), dispenser.InvalidInputError, "invalid_input", "invalid_input"),
        (lambda: d.create("x" * 300), dispenser.InvalidInputError, "invalid_input", "invalid_input"),
        (lambda: d.open_queue("q"), dispenser.NotFoundError, "no_such_queue", "not_found"),
    ]
    # ensure means one thing on every kind: a setting no alter changes is a ConflictError
    # naming what differs (a queue's was an AlreadyExistsError).
    d.create("f", format="Y-{n}")
    d.create_queue("lobby", max=99)
    cases += [
        (lambda: d.ensure("f", start=3, format="Y-{n}"), dispenser.ConflictError, "spec_conflict", "conflict"),
        (lambda: d.ensure_queue("lobby", min=1, max=99), dispenser.ConflictError, "spec_conflict", "conflict"),
        (lambda: d.create_queue("lobby", max=99), dispenser.AlreadyExistsError, "already_exists", "already_exists"),
    ]
    for call, cls, code, kind in cases:
        with pytest.raises(cls) as e:
            call()
        assert (e.value.code, e.value.kind) == (code, kind), e.value
        assert isinstance(e.value, dispenser.DispenserError)
        assert str(e.value) == e.value.message and e.value.message
    with pytest.raises(dispenser.ConflictError) as e:
        d.ensure_queue("lobby", min=1, max=99)
    assert e.value.message == 'queue "lobby" exists with another spec: min 0 (asked 1); nothing was written'
    # What an alter changes is kept and told (issue 60): the handle's `altered`.
    q = d.ensure_queue("lobby", max=19)
    assert q.altered == [{"setting": "max", "stored": "99", "asked": "19"}]
    f = d.ensure("f", format="X-{n}")
    assert f.altered == [{"setting": "format", "stored": '"Y-{n}"', "asked": '"X-{n}"'}]
    assert d.peek("f")["format"] == "Y-{n}"
    assert d.open("f").altered == []


def test_invalid_input_is_a_value_error_naming_the_value_and_writes_nothing(d):
    with pytest.raises(ValueError) as e:
        d.create("orders", min=10, max=5)
    assert "min (10) must be below max (5)" in str(e.value)
    assert d.list() == []
    with pytest.raises(dispenser.InvalidInputError) as e:
        d.ensure_gapless("g", collection="inv", field="n", lease=-1)
    assert "lease" in str(e.value)
    with pytest.raises(dispenser.InvalidInputError) as e:
        d.open_daily("t", "Mars/Olympus")
    assert "Mars/Olympus" in str(e.value)
    with pytest.raises(dispenser.InvalidInputError) as e:
        dispenser.Dispenser.connect("mongodb://127.0.0.1:1", strategy="fastest")
    assert "fastest" in str(e.value)
    # A keyword renamed in the five-surface vocabulary is refused naming its new name.
    with pytest.raises(TypeError) as e:
        d.audit("invoices", "number", start=1)
    assert "'start'" in str(e.value) and "renamed from_" in str(e.value), str(e.value)


def test_an_unknown_keyword_is_refused_naming_the_closest_known_one(d, uri, collection):
    import asyncio

    import dispenser.aio

    def refused(call):
        with pytest.raises(TypeError) as e:
            call()
        return str(e.value)

    # A typo: the method, the keyword given and the closest of the method's own keywords.
    message = refused(lambda: d.create("typo", strat=5))
    assert "create() got an unexpected keyword argument 'strat'" in message, message
    assert message.endswith("; did you mean 'start'?"), message
    with pytest.raises(dispenser.NotFoundError):
        d.peek("typo")  # nothing was written
    # A static method, a positional-or-keyword parameter, a handle's method, a queue's.
    assert refused(
        lambda: dispenser.Dispenser.connect(uri, collection=collection, timout=3)
    ).endswith("did you mean 'timeout'?")
    assert refused(lambda: dispenser.AdoptSource.counter("c", filtr={}, field="n")).endswith(
        "did you mean 'filter'?"
    )
    s = d.create("kw")
    assert refused(lambda: s.alter(maxx=9)).endswith("did you mean 'max'?")
    assert refused(lambda: s.history(limt=2)).endswith("did you mean 'limit'?")
    q = d.create_queue("kwq", max=9)
    assert refused(lambda: q.take(cout=2)).endswith("did you mean 'count'?")
    assert q.peek()["taken"] == 0  # no ticket was taken
    # Nothing close: the message as the extension wrote it.
    assert refused(lambda: d.create("typo", zzzzzz=1)).endswith("unexpected keyword argument 'zzzzzz'")
    # Not a keyword problem: the message untouched.
    assert "renamed from_" in refused(lambda: d.audit("invoices", "number", start=1))
    # The wrapped methods keep their names, documentation and signatures.
    assert dispenser.Dispenser.create.__name__ == "create"
    assert "Creates a new sequence" in (dispenser.Dispenser.create.__doc__ or "")
    import inspect

    assert "start" in inspect.signature(dispenser.Dispenser.create).parameters

    async def main():
        a = await dispenser.aio.Dispenser.connect(uri, database=DATABASE, collection=collection)
        try:
            return refused(lambda: a.ensure("typo", cylce=True))
        finally:
            await a.aclose()

    assert asyncio.run(main()).endswith("did you mean 'cycle'?")


def test_exhausted_and_queue_refusals(d):
    s = d.create("small", max=2)
    assert [s.next(), s.next()] == [1, 2]
    with pytest.raises(dispenser.ExhaustedError) as e:
        s.next()
    assert e.value.code == "exhausted" and '"small"' in str(e.value)
    q = d.create_queue("desk", min=1, max=2)
    first, second = q.take()["ticket"], q.take()["ticket"]
    with pytest.raises(dispenser.QueueRefusedError) as e:
        q.take()
    assert e.value.code == "queue_full"
    assert q.call(desk="A")["ticket"] == first
    assert q.call(desk="A")["ticket"] == second
    with pytest.raises(dispenser.QueueRefusedError) as e:
        q.call()
    assert e.value.code == "nobody_waiting"
    assert e.value.written == "nothing_written"
    # A desk lets go of its ticket with finish; then it shows none, for recall and finish.
    assert q.finish(desk="A")["ticket"] == second
    for act in (q.recall, q.finish):
        with pytest.raises(dispenser.QueueRefusedError) as e:
            act(desk="A")
        assert e.value.code == "no_ticket_shown" and '"A"' in str(e.value)


def test_a_queue_with_people_waiting_is_deleted_only_when_forced(d):
    q = d.create_queue("room", max=5)
    q.take(count=2)
    with pytest.raises(dispenser.ConflictError) as e:
        d.delete_queue("room")
    assert e.value.code == "queue_in_use" and e.value.written == "nothing_written"
    assert "2" in str(e.value)
    assert q.peek()["waiting"] == 2
    d.delete_queue("room", force=True)
    with pytest.raises(dispenser.NotFoundError):
        d.open_queue("room")
    last = d.history("room", kind="queue")[-1]
    assert (last["op"], last["params"]["force"], last["kind"]) == ("delete", True, "queue")


def test_an_unreachable_server_is_unavailable_and_the_uri_password_never_shown():
    d = dispenser.Dispenser.connect("mongodb://user:s3cret@127.0.0.1:1/", timeout=0.5)
    with pytest.raises(dispenser.UnavailableError) as e:
        d.ping()
    assert e.value.code in ("database", "timeout")
    assert "s3cret" not in str(e.value)


def test_exceptions_pickle_with_their_fields(d):
    with pytest.raises(dispenser.NotFoundError) as e:
        d.open("missing")
    again = pickle.loads(pickle.dumps(e.value))
    assert type(again) is dispenser.NotFoundError
    assert (again.code, again.kind, again.message, again.written) == (
        e.value.code,
        e.value.kind,
        e.value.message,
        e.value.written,
    )


def test_a_ticket_is_acted_on_by_its_identity_not_by_a_number_that_came_round(d):
    # Tickets 1, 2, 0: the fourth ticket taken shows 1 again (issue 59).
    q = d.create_queue("round", min=0, max=2)
    p = q.take(request_id="phone-p.1")
    q.take()
    q.call(desk="A")
    q.call(desk="A")
    q.take()
    r = q.take()
    assert (p["ticket"], r["ticket"]) == (1, 1) and p["serial"] != r["serial"]
    # P gives up late: refused, and R's ticket still waits.
    with pytest.raises(dispenser.QueueRefusedError) as e:
        q.cancel(request_id="phone-p.1")
    assert e.value.code == "ticket_not_waiting" and e.value.written == "nothing_written"
    assert "it was called" in str(e.value)
    with pytest.raises(dispenser.QueueRefusedError):
        q.cancel(serial=p["serial"], incarnation=p["incarnation"])
    assert q.waiting_ticket(1)["serial"] == r["serial"]
    gone = q.cancel(serial=r["serial"], incarnation=r["incarnation"])
    assert (gone["serial"], gone["position"]) == (r["serial"], None)
    with pytest.raises(dispenser.InvalidInputError) as e:
        q.cancel(serial=r["serial"], incarnation="not-hex")
    assert "incarnation" in str(e.value)
    with pytest.raises(dispenser.InvalidInputError):
        q.cancel()


def test_contention_corruption_and_a_business_writes_exception_reach_python_as_theirs(d, mongo, collection):
    """The kinds no other test raises from Python, each as its own class, and the text of a
    failed business write's own exception in the error's message."""
    # Contention: another holder keeps the lease past this caller's wait.
    business = f"{collection}_held"
    g = d.create_gapless("held", collection=business, field="n")
    with holding(g):
        with pytest.raises(dispenser.ContentionError) as e:
            d.ensure_gapless("held", collection=business, field="n", wait=0.2).issue(lambda n: n)
        assert (e.value.kind, e.value.written) == ("contention", "nothing_written"), e.value
        assert '"held"' in str(e.value), str(e.value)

    # A business write that raises: the error names the exception and its text, and the
    # exception itself is the cause.
    def declined(n: int):
        raise ValueError("card declined")

    with pytest.raises(dispenser.BusinessWriteError) as e:
        g.issue(declined)
    assert "ValueError: card declined" in str(e.value), str(e.value)
    assert isinstance(e.value.__cause__, ValueError)

    # Corrupt: a stored document whose value is not a number.
    s = d.create("broken")
    mongo[DATABASE][collection].update_one({"_id": "broken"}, {"$set": {"value": "seven"}})
    with pytest.raises(dispenser.CorruptError) as e:
        s.next()
    assert e.value.kind == "corrupt" and '"broken"' in str(e.value), str(e.value)


def test_a_count_that_is_no_int_stays_a_type_error_and_a_limit_takes_64_bits(d):
    s = d.create("counted")
    for wrong in (1.5, "3"):
        with pytest.raises(TypeError) as e:
            s.next_n(wrong)
        assert not isinstance(e.value, dispenser.InvalidInputError), e.value
    assert s.peek()["value"] == 0  # nothing drawn
    # A listing's limit is a 64-bit size here: 2**40 lists what there is; past 64 bits the
    # error names the bound.
    assert [x["name"] for x in d.list(limit=2**40)] == ["counted"]
    with pytest.raises(dispenser.InvalidInputError) as e:
        d.list(limit=2**64)
    assert "at most 18446744073709551615" in str(e.value), str(e.value)
