"""dispenser for asyncio: the same API as ``dispenser``, each call awaited.

    import dispenser.aio

    d = await dispenser.aio.Dispenser.connect("mongodb://127.0.0.1:27017")
    orders = await d.ensure("orders")
    n = await orders.next()

The core runs on its own threads: it works under any asyncio loop (uvloop included) and
beside PyMongo's ``AsyncMongoClient``, Beanie or Motor. A gap-free ``issue(write)`` accepts
a coroutine function as ``write`` (an ``AsyncMongoClient`` insert) and runs it on the
caller's loop, in a copy of the caller's ``contextvars`` context. Cancelling a call drops it
in the core (a draw cancelled after its write was sent leaves a gap, never a duplicate).
``async with`` a dispenser or a block client closes it at the end (``aclose()``).
"""

from __future__ import annotations

from ._dispenser import AdoptSource, Format, Issued
from ._dispenser import aio as _aio
from ._keywords import suggest_keywords as _suggest_keywords

Dispenser = _aio.Dispenser
Sequence = _aio.Sequence
BlockSequence = _aio.BlockSequence
StripedSequence = _aio.StripedSequence
DailySequence = _aio.DailySequence
Gapless = _aio.Gapless
Queue = _aio.Queue
_suggest_keywords(
    [BlockSequence, DailySequence, Dispenser, Gapless, Queue, Sequence, StripedSequence]
)
from ._errors import *  # noqa: F401,F403
from ._errors import __all__ as _errors

__all__ = [
    "Dispenser",
    "Sequence",
    "BlockSequence",
    "StripedSequence",
    "DailySequence",
    "Gapless",
    "Issued",
    "Queue",
    "AdoptSource",
    "Format",
    *_errors,
]
