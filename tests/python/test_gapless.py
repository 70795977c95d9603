"""Gap-free numbers whose business write is the app's own pymongo insert, some failing: the
audit finds 1..N, each used or voided exactly once."""

from __future__ import annotations

import threading

import pytest

import dispenser
from conftest import DATABASE, holding


def test_gapless_issue_with_pymongo_inserts_some_failing_leaves_no_gap(d, mongo, collection):
    business = f"{collection}_inv"
    g = d.ensure_gapless("invoices", collection=business, field="number")
    coll = mongo[DATABASE][business]
    coll.insert_one({"_id": "taken"})
    outcomes = {"used": [], "declined": 0, "duplicate_id": 0}
    lock = threading.Lock()

    def worker(k: int):
        for i in range(12):
            mode = (k * 12 + i) % 5

            def write(n: int):
                if mode == 1:
                    raise ValueError("card declined")
                # A failure of the driver itself: a duplicate key on _id, not on the number.
                doc = {"_id": "taken"} if mode == 3 else {}
                coll.insert_one({**doc, "number": n, "total": 10 * n})
                return f"invoice {n}"

            try:
                issued = g.issue(write)
            except dispenser.BusinessWriteError as e:
                assert e.code == "business_write"
                with lock:
                    # A write that raised is a definite failure: the number was released.
                    assert e.written == "nothing_written", e
                    if mode == 1:
                        assert isinstance(e.__cause__, ValueError), e
                        outcomes["declined"] += 1
                    else:
                        assert mode == 3, e
                        outcomes["duplicate_id"] += 1
                continue
            assert mode not in (1, 3)
            assert issued.value == f"invoice {issued.number}"
            with lock:
                outcomes["used"].append(issued.number)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    used = outcomes["used"]
    # The gap-free sequence's own history: its create, under its kind, never a sequence's.
    created = d.history("invoices", kind="gapless")
    assert g.history(limit=1) == created[:1]
    assert [(h["op"], h["kind"]) for h in created][:1] == [("create", "gapless")], created
    assert d.history("invoices", kind="sequence") == []
    assert outcomes["declined"] > 0 and outcomes["duplicate_id"] > 0, outcomes
    assert len(used) == 96 - outcomes["declined"] - outcomes["duplicate_id"]
    # Void the next number on purpose, then use one more: no gap either way.
    nxt = g.peek()["next"]
    g.void(nxt, "form destroyed")
    last = g.issue(lambda n: coll.insert_one({"number": n}) and n).number
    g.flush()
    assert last == nxt + 1
    n_total = len(used) + 2
    assert sorted(used) == list(range(1, n_total - 1))
    audit = d.audit(business, "number", from_=1)
    assert audit["clean"], audit
    assert (audit["numbers"], audit["missing"], audit["duplicated"], audit["voided"]) == (
        n_total,
        0,
        0,
        1,
    ), audit
    carried = sorted(x["number"] for x in coll.find({"number": {"$exists": True}}))
    assert carried == list(range(1, n_total + 1))
    # Deleted: the state goes, the documents stay, the history says so.
    d.delete_gapless("invoices")
    with pytest.raises(dispenser.NotFoundError):
        d.open_gapless("invoices")
    assert coll.count_documents({"number": {"$exists": True}}) == n_total
    assert d.history("invoices", kind="gapless")[-1]["op"] == "delete"


def test_a_gapless_sequence_refuses_what_its_index_cannot_guarantee(d, mongo, collection):
    business = f"{collection}_inv"
    mongo[DATABASE][business].create_index("number", unique=True, sparse=True)
    with pytest.raises(dispenser.InvalidInputError) as e:
        d.ensure_gapless("inv", collection=business, field="number")
    assert "sparse" in str(e.value)


def test_the_gapless_vocabulary_is_every_surfaces(d, mongo, collection):
    """Issue 60: a release answers the library's shape, the list answers states, the handle
    deletes itself (with force while a lease runs), the longest lease is in seconds, the
    audit's first number is `from_`."""
    business = f"{collection}_vocab"
    g = d.create_gapless("inv", collection=business, field="n", max_lease=60, void_extra={"status": "VOID"})
    assert g.peek()["max_lease_seconds"] == 60.0
    # A holder that stopped after taking 1: its lease ends at once; 1 was not written.
    with holding(g):
        with pytest.raises(dispenser.ConflictError) as e:
            d.open_gapless("inv").delete()
        assert (e.value.code, e.value.kind) == ("lease_held", "conflict")
        released = d.open_gapless("inv").release(1, "holder killed", force=True)
        assert released == {"outcome": "voided", "number": 1}, released
    assert mongo[DATABASE][business].find_one({"n": 1})["status"] == "VOID"
    assert g.alter(max_lease=0.25)["max_lease_seconds"] == 0.25
    listed = d.list_gapless()
    assert [(s["name"], s["next"], s["max_lease_seconds"]) for s in listed] == [("inv", 2, 0.25)], listed
    assert d.audit(business, "n", from_=1)["voided"] == 1
    g.delete(force=True)
    assert d.list_gapless() == []
    with pytest.raises(dispenser.NotFoundError):
        g.peek()
