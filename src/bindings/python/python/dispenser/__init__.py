"""dispenser: unique numbers from MongoDB, never issued twice.

Sequences (optionally bounded and cyclic), block clients, striped and daily sequences,
gap-free invoice numbers and ticket queues, drawn in-process by the dispenser Rust core.
Every call here blocks until the core answers, with the GIL released meanwhile: threads
drawing from one handle at once share its writes. For asyncio, use ``dispenser.aio``.

    import dispenser

    d = dispenser.Dispenser.connect("mongodb://127.0.0.1:27017")
    orders = d.ensure("orders")
    orders.next()                            # 1, 2, 3, ...
    tickets = d.ensure("tickets", max=99, cycle=True)

A blocked call is interrupted by Ctrl-C (any signal handler that raises) within about 50 ms:
the call is dropped in the core and the handler's exception (``KeyboardInterrupt``) is raised
with ``written`` set (``"unknown"`` for a call that writes, ``"nothing_written"`` for a read).
``with dispenser.Dispenser.connect(...) as d:`` closes it at the end (``close()``): block
clients give back what they hold and later calls are refused. The shapes of the dicts the
calls return are in ``dispenser.types``; the ODM fields in ``dispenser.mongoengine`` and
``dispenser.beanie``.

After ``os.fork`` (gunicorn ``--preload``, Celery prefork, multiprocessing) every handle
works in the child: the first call there opens it again on the child's own runtime and
connection pool; the parent's blocks are never used by the child.
"""

from __future__ import annotations

import os as _os

from . import _dispenser
from ._dispenser import (
    AdoptSource,
    BlockSequence,
    DailySequence,
    Dispenser,
    Format,
    Gapless,
    Issued,
    Queue,
    Sequence,
    StripedSequence,
    __version__,
)
from ._errors import (
    AlreadyExistsError,
    BusinessWriteError,
    ConflictError,
    ContentionError,
    CorruptError,
    DispenserError,
    ExhaustedError,
    InvalidInputError,
    NotFoundError,
    QueueRefusedError,
    UnavailableError,
)

from ._keywords import suggest_keywords as _suggest_keywords

_suggest_keywords(
    [AdoptSource, BlockSequence, DailySequence, Dispenser, Gapless, Queue, Sequence, StripedSequence]
)

if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_dispenser._after_fork_in_child)

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
    "DispenserError",
    "InvalidInputError",
    "NotFoundError",
    "AlreadyExistsError",
    "ConflictError",
    "ExhaustedError",
    "QueueRefusedError",
    "ContentionError",
    "UnavailableError",
    "CorruptError",
    "BusinessWriteError",
    "__version__",
]
