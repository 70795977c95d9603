"""How the runtime talks to asyncio (used by the extension, not by applications)."""

from __future__ import annotations

import asyncio
import inspect


async def call(write, n):
    """Runs a gap-free business write on the event loop: ``write(n)``, awaited if it
    returns an awaitable (a coroutine function, an ``AsyncMongoClient`` or Motor call)."""
    result = write(n)
    if inspect.isawaitable(result):
        result = await result
    return result


def start(write, n, deliver):
    """Starts the business write as a task of the running loop; ``deliver`` gets the task
    when it ends. Scheduled with ``call_soon_threadsafe(..., context=ctx)``, ``ctx`` a copy
    of the caller's context: the task copies it, so the write sees the caller's
    ``contextvars``."""
    task = asyncio.ensure_future(call(write, n))
    task.add_done_callback(deliver)
