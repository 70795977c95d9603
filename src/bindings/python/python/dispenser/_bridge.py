"""How the runtime talks to asyncio (used by the extension, not by applications)."""

from __future__ import annotations

import inspect


async def call(write, n):
    """Runs a gap-free business write on the event loop: ``write(n)``, awaited if it
    returns an awaitable (a coroutine function, a Motor call)."""
    result = write(n)
    if inspect.isawaitable(result):
        result = await result
    return result
