"""A small typed program using dispenser, checked by mypy (test_typing.py); never run. Every
value a call returns has the type of the stubs (dispenser.types), so a typo in a key or a
wrong type is an error before it runs."""

from __future__ import annotations

import asyncio
from typing import Optional

import dispenser
import dispenser.aio
from dispenser.types import (
    Adopted,
    Audit,
    CloseReport,
    DoctorReport,
    GaplessState,
    HistoryEntry,
    QueueState,
    SequenceState,
    Stats,
    Ticket,
)


def sync(uri: str) -> None:
    with dispenser.Dispenser.connect(uri, database="shop") as d:
        orders = d.ensure("orders", max=999)
        n: int = orders.next()
        run: range = orders.next_n(10)
        label: str = d.create("inv", format="INV-{n:06}").next_formatted()
        state: SequenceState = orders.peek()
        nxt: Optional[int] = state["next"]
        used: float = state["usage"]["fraction_used"]
        stats: Stats = orders.stats()
        writes: int = stats["writes"]
        adopted: list[Adopted] = d.adopt(
            "orders", dispenser.AdoptSource.mongoengine("order.number").in_database("legacy")
        )
        highest: Optional[int] = adopted[0]["highest"]
        history: list[HistoryEntry] = orders.history(limit=10)
        op: str = history[0]["op"]
        with orders.into_blocks(size=100) as blocks:
            m: int = blocks.next()
            report: CloseReport = blocks.close()
        q = d.ensure_queue("desk", max=99, format="A-{n:03}")
        ticket: Ticket = q.take()
        family: list[Ticket] = q.take(count=3)
        called: Ticket = q.call(desk="1")
        status: QueueState = q.peek()
        waiting: int = status["waiting"]
        q.delete(force=True)
        g = d.ensure_gapless("invoices", collection="invoices", field="number")
        issued = g.issue(lambda k: f"invoice {k}")
        text: str = issued.value
        gstate: GaplessState = g.peek()
        audit: Audit = d.audit("invoices", "number", from_=1)
        doctor: DoctorReport = d.doctor(tasks=2, time_limit=5.0)
        fit: bool = doctor["fit"]
        rendered: str = dispenser.Format("T-{n}").render(n)
        print(n, run, label, nxt, used, writes, highest, op, m, report, ticket, family, called,
              waiting, text, gstate, audit, fit, rendered)


async def aio(uri: str) -> None:
    async with await dispenser.aio.Dispenser.connect(uri, database="shop") as d:
        orders = await d.ensure("orders")
        n: int = await orders.next()
        state: SequenceState = await orders.peek()
        g = await d.ensure_gapless("invoices", collection="invoices", field="number")

        async def write(k: int) -> str:
            return f"invoice {k}"

        issued = await g.issue(write)
        text: str = issued.value
        report: CloseReport = await d.aclose()
        print(n, state, text, report)


def odm() -> None:
    import mongoengine  # type: ignore[import-untyped]
    from beanie import Document

    import dispenser.beanie
    import dispenser.mongoengine

    class Invoice(mongoengine.Document):  # type: ignore[misc]
        number = dispenser.mongoengine.SequenceField(adopt=True, block=100)

    class Order(dispenser.beanie.Numbered, Document):  # type: ignore[misc]
        number: Optional[int] = dispenser.beanie.SequenceField(gapless=True)

    print(Invoice, Order)


asyncio.run(aio("mongodb://127.0.0.1"))
