"""dispenser.mongoengine.SequenceField against mongoengine 0.29: a collection numbered by
mongoengine's own SequenceField switched over by changing the import (its counter adopted),
saves from threads, no number repeated; a switch without adopting refused; the gap-free
mode leaves no gap when some saves fail."""

from __future__ import annotations

import threading

import mongoengine
import pytest
from bson import ObjectId
from mongoengine.connection import disconnect

import dispenser
import dispenser.mongoengine
from conftest import DATABASE


@pytest.fixture
def alias(uri, collection):
    """A mongoengine connection of its own (alias = the test's collection)."""
    mongoengine.connect(db=DATABASE, host=uri, alias=collection, uuidRepresentation="standard")
    yield collection
    disconnect(alias=collection)


def model(alias: str, collection: str, field, *, extra=None):
    """A mongoengine Document class on `collection` whose `number` is `field`."""
    attrs = {
        "number": field,
        "customer": mongoengine.StringField(),
        "meta": {"collection": collection, "db_alias": alias},
        **(extra or {}),
    }
    return type(f"Invoice_{collection}", (mongoengine.Document,), attrs)


def save_from_threads(cls, threads: int, each: int) -> list:
    numbers: list = []
    lock = threading.Lock()

    def work(k: int) -> None:
        for i in range(each):
            doc = cls(customer=f"c{k}-{i}").save()
            with lock:
                numbers.append(doc.number)

    pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return numbers


def test_a_collection_numbered_by_mongoengine_switches_over_by_its_import_and_repeats_nothing(
    d, alias, collection, mongo
):
    business = f"{collection}_inv"
    # Before: mongoengine's own SequenceField numbered 30 invoices (counter in
    # mongoengine.counters, `next` the last number issued). From one thread: its
    # findAndModify without a projection returns wrong values under concurrency on the local
    # test server (see the shared notes), a quirk of that server, not of mongoengine.
    before = model(alias, business, mongoengine.SequenceField(db_alias=alias))
    old = save_from_threads(before, 1, 30)
    assert sorted(old) == list(range(1, 31))
    counter = mongo[DATABASE]["mongoengine.counters"].find_one({"_id": f"{business}.number"})
    assert counter["next"] == 30

    # After: the import changed; the dispenser given once for the connection.
    dispenser.mongoengine.use(d, alias=alias)
    after = model(alias, business, dispenser.mongoengine.SequenceField(db_alias=alias))
    new = save_from_threads(after, 4, 10)
    assert sorted(new) == list(range(31, 71)), sorted(new)
    # Read back: every document carries a distinct number, 1..70.
    stored = sorted(x["number"] for x in mongo[DATABASE][business].find())
    assert stored == list(range(1, 71))
    # The switch is in the sequence's history: adopted from mongoengine's counter.
    adopts = [e for e in d.history(f"{business}.number") if e["op"] == "adopt"]
    assert len(adopts) == 1 and adopts[0]["params"]["highest"] == 30, adopts
    # mongoengine's helpers act on the dispenser sequence.
    assert after.number.get_next_value() == 71
    with pytest.raises(dispenser.ConflictError) as e:
        after.number.set_next_value(5)
    assert e.value.code == "would_go_backwards"
    # Draws of concurrent saves shared writes.
    stats = after.number._ready().stats()
    assert stats["issued"] == 40 and stats["writes"] <= 40, stats


def test_a_switch_without_adopting_is_refused_naming_the_adopt(d, alias, collection, mongo):
    business = f"{collection}_inv"
    before = model(alias, business, mongoengine.SequenceField(db_alias=alias))
    for _ in range(5):
        before(customer="x").save()
    # A field told to adopt nothing finds numbers at or past its sequence's next: refused,
    # and nothing is saved.
    after = model(alias, business, dispenser.mongoengine.SequenceField(db_alias=alias, dispenser=d, adopt=False))
    with pytest.raises(dispenser.ConflictError) as e:
        after(customer="y").save()
    assert e.value.code == "already_numbered" and e.value.written == "nothing_written"
    assert "holds the number 5" in str(e.value) and "adopt" in str(e.value), str(e.value)
    assert "AdoptSource.highest" in str(e.value), str(e.value)
    assert mongo[DATABASE][business].count_documents({}) == 5
    # Told the source (the documents themselves), it numbers past them.
    source = dispenser.AdoptSource.highest(business, "number")
    adopted = model(alias, business, dispenser.mongoengine.SequenceField(db_alias=alias, dispenser=d, adopt=source))
    assert adopted(customer="z").save().number == 6
    # A block client: numbers from memory, after the same adopt and check.
    blocks = model(alias, business, dispenser.mongoengine.SequenceField(db_alias=alias, dispenser=d, block=10))
    got = [blocks(customer="b").save().number for _ in range(3)]
    assert got == [7, 8, 9]


def test_gapless_mode_uses_a_number_exactly_when_the_insert_succeeds(d, alias, collection, mongo):
    business = f"{collection}_inv"
    gapless = dispenser.mongoengine.SequenceField(db_alias=alias, dispenser=d, gapless=True)
    cls = model(alias, business, gapless, extra={"ref": mongoengine.StringField(unique=True)})
    taken = ObjectId()
    mongo[DATABASE][business].insert_one({"_id": taken, "ref": "seed"})
    outcomes = {"saved": [], "refused": 0}
    lock = threading.Lock()

    def work(k: int) -> None:
        for i in range(8):
            mode = (k * 8 + i) % 4
            # Every 4th save fails in its insert: a duplicate unique `ref`, or a duplicate _id.
            doc = cls(customer=f"{k}-{i}", ref="seed" if mode == 1 else f"r{k}-{i}")
            try:
                if mode == 3:
                    doc.id = taken
                    doc.save(force_insert=True)
                else:
                    doc.save()
            except mongoengine.NotUniqueError:
                with lock:
                    outcomes["refused"] += 1
                assert doc.number is None
                continue
            with lock:
                outcomes["saved"].append(doc.number)

    pool = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    saved = sorted(outcomes["saved"])
    assert outcomes["refused"] == 16 and len(saved) == 16, outcomes
    assert saved == list(range(1, 17)), saved
    gapless._ready().flush()
    audit = d.audit(business, "number", from_=1)
    assert audit["clean"] and audit["numbers"] == 16 and audit["missing"] == 0, audit
    # A read before the save numbers nothing; a bulk insert is refused, not left unnumbered.
    fresh = cls(customer="later", ref="later")
    assert fresh.number is None
    with pytest.raises(dispenser.InvalidInputError):
        cls.objects.insert([cls(customer="bulk", ref="bulk")])
    assert fresh.save().number == 17
