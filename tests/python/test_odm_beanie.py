"""dispenser.beanie against Beanie 2 on PyMongo's AsyncMongoClient: documents numbered on
insert (concurrent inserts share writes; insert_many takes one run), a collection already
numbered refused until told what to adopt, and the gap-free mode leaving no gap when some
inserts fail."""

from __future__ import annotations

import asyncio
from typing import Optional

import pytest
from beanie import Document, init_beanie
from pymongo import AsyncMongoClient, IndexModel

import dispenser
import dispenser.aio
import dispenser.beanie
from dispenser.beanie import Numbered, SequenceField
from conftest import DATABASE


def _numbering(cls):
    """The numbering of `cls`'s field `number`."""
    return next(n for n in cls._numbering() if n.field == "number")


def run(main):
    return asyncio.run(main())


async def connect(uri: str, collection: str):
    client = AsyncMongoClient(uri)
    d = await dispenser.aio.Dispenser.connect(uri, database=DATABASE, collection=collection)
    return client, d


def test_inserts_are_numbered_and_a_numbered_collection_needs_an_adopt(uri, collection):
    business = f"{collection}_orders"

    async def main():
        client, d = await connect(uri, collection)
        # Numbered by hand before: 1..12.
        await client[DATABASE][business].insert_many([{"number": n} for n in range(1, 13)])

        class Order(Numbered, Document):
            number: Optional[int] = SequenceField(dispenser=d)
            customer: str = ""

            class Settings:
                name = business

        await init_beanie(database=client[DATABASE], document_models=[Order])
        with pytest.raises(dispenser.ConflictError) as e:
            await Order(customer="a").insert()
        assert e.value.code == "already_numbered" and "holds the number 12" in str(e.value)
        assert await Order.find_all().count() == 12

        class Adopting(Numbered, Document):
            number: Optional[int] = SequenceField(f"{business}.number", dispenser=d, adopt=True)
            customer: str = ""

            class Settings:
                name = business

        await init_beanie(database=client[DATABASE], document_models=[Adopting])
        docs = [Adopting(customer=f"c{i}") for i in range(40)]
        await asyncio.gather(*(doc.insert() for doc in docs))
        assert sorted(doc.number for doc in docs) == list(range(13, 53))
        # save() of a new document numbers it too, as does insert_many; from the block (the
        # default), a few writes for the lot.
        saved = await Adopting(customer="s").save()
        assert saved.number == 53
        many = [Adopting(customer=f"m{i}") for i in range(5)]
        await Adopting.insert_many(many)
        assert [m.number for m in many] == [54, 55, 56, 57, 58]
        blocks = _numbering(Adopting).handle
        assert blocks.stats()["issued"] == 46 and 1 <= blocks.stats()["block_refills"] <= 8
        # Closing the dispenser gives the block's tail back: block=None then draws from 59,
        # each insert its own draw, insert_many one run for the lot.
        report = await d.aclose()
        assert report["given_back"] >= 1 and report["lost"] == 0, report
        client, d = await connect(uri, collection)

        class Each(Numbered, Document):
            number: Optional[int] = SequenceField(f"{business}.number", dispenser=d, block=None)
            customer: str = ""

            class Settings:
                name = business

        await init_beanie(database=client[DATABASE], document_models=[Each])
        assert (await Each(customer="e").insert()).number == 59
        each = [Each(customer=f"e{i}") for i in range(5)]
        await Each.insert_many(each)
        assert [m.number for m in each] == [60, 61, 62, 63, 64]
        stats = _numbering(Each).handle.stats()
        assert stats["issued"] == 6 and stats["writes"] == 2 and stats["block_refills"] == 0, stats
        stored = sorted([x["number"] async for x in client[DATABASE][business].find()])
        assert stored == list(range(1, 65))
        await d.aclose()
        await client.close()

    run(main)


def test_gapless_inserts_use_a_number_exactly_when_they_succeed(uri, collection):
    business = f"{collection}_invoices"

    async def main():
        client, d = await connect(uri, collection)
        dispenser.beanie.use(d)

        class Invoice(Numbered, Document):
            number: Optional[int] = SequenceField(gapless=True)
            ref: str

            class Settings:
                name = business
                indexes = [IndexModel("ref", unique=True)]

        await init_beanie(database=client[DATABASE], document_models=[Invoice])
        await Invoice(ref="seed").insert()

        async def insert(k: int):
            # Every third insert fails in the database: a duplicate unique `ref`.
            doc = Invoice(ref="seed" if k % 3 == 1 else f"r{k}")
            try:
                await doc.insert()
            except Exception as e:  # pymongo's DuplicateKeyError, as Beanie raises it
                assert getattr(e, "code", None) == 11000, e
                assert doc.number is None
                return None
            return doc.number

        got = await asyncio.gather(*(insert(k) for k in range(30)))
        used = sorted(n for n in got if n is not None)
        assert len(used) == 20 and used == list(range(2, 22)), used
        g = await d.open_gapless(f"{business}.number")
        await g.flush()
        audit = await d.audit(business, "number", from_=1)
        assert audit["clean"] and audit["numbers"] == 21 and audit["missing"] == 0, audit
        with pytest.raises(dispenser.InvalidInputError):
            await Invoice.insert_many([Invoice(ref="bulk")])
        with pytest.raises(TypeError, match=r"argument 'gaples'; did you mean 'gapless'\?$"):
            dispenser.beanie.SequenceField(gaples=True)
        async with d:
            pass
        assert d.closed
        await client.close()

    run(main)


def test_an_aio_business_write_sees_the_callers_context(uri, collection):
    import contextvars

    request = contextvars.ContextVar("request", default=None)

    async def main():
        client, d = await connect(uri, collection)
        g = await d.ensure_gapless("ctx", collection=f"{collection}_ctx", field="number")
        coll = client[DATABASE][f"{collection}_ctx"]

        async def write(n: int):
            await coll.insert_one({"number": n, "request": request.get()})
            return request.get()

        async def handle(name: str):
            request.set(name)
            return (await g.issue(write)).value

        seen = await asyncio.gather(*(handle(f"req-{k}") for k in range(10)))
        assert seen == [f"req-{k}" for k in range(10)]
        await g.flush()
        await client.close()

    run(main)
