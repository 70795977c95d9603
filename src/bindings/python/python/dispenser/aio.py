"""dispenser for asyncio: the same API as ``dispenser``, each call awaited.

    import dispenser.aio

    d = await dispenser.aio.Dispenser.connect("mongodb://127.0.0.1:27017")
    orders = await d.ensure("orders")
    n = await orders.next()

The core runs on its own threads: it works under any asyncio loop (uvloop included) and
beside Motor or Beanie. A gap-free ``issue(write)`` accepts a coroutine function as
``write`` (a Motor insert) and runs it on the caller's loop. Cancelling a call drops it in
the core (a draw cancelled after its write was sent leaves a gap, never a duplicate).
"""

from __future__ import annotations

from ._dispenser import Issued
from ._dispenser import aio as _aio

Dispenser = _aio.Dispenser
Sequence = _aio.Sequence
BlockSequence = _aio.BlockSequence
StripedSequence = _aio.StripedSequence
DailySequence = _aio.DailySequence
Gapless = _aio.Gapless
Queue = _aio.Queue
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
    *_errors,
]
