"""Ctrl-C interrupts a blocked sync call: the call is dropped in the core (as a cancelled
asyncio call is) and the signal handler's exception is raised with ``written`` saying what
the call may have written. The server here is behind a proxy that forwards the call's request
and never answers it: without the interrupt the call would wait for its 10 s timeout. (The
latency, 50 ms at most plus the handler, is printed, not asserted: `-s` shows it.)"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
import urllib.parse

import pytest

import dispenser
from conftest import DATABASE


class SilentProxy:
    """A TCP proxy to the server that forwards every request; once ``silent`` is set it
    stops forwarding the answers (the requests still reach the server)."""

    def __init__(self, uri: str) -> None:
        parts = urllib.parse.urlsplit(uri)
        self.target = (parts.hostname, parts.port or 27017)
        self.silent = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(5)
        self.uri = f"mongodb://127.0.0.1:{self.port}/?directConnection=true"

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)

        async def pipe(reader, writer, answers: bool) -> None:
            with contextlib.suppress(Exception):
                while data := await reader.read(65536):
                    if answers and self.silent.is_set():
                        continue
                    writer.write(data)
                    await writer.drain()
            writer.close()

        async def serve(reader, writer) -> None:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
            await asyncio.gather(pipe(reader, up_writer, False), pipe(up_reader, writer, True))

        async def start() -> None:
            server = await asyncio.start_server(serve, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    def close(self) -> None:
        async def stop() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@contextlib.contextmanager
def sigint_after(seconds: float):
    """Sends SIGINT to this process after `seconds`; yields a list that gets the time it
    was sent."""
    assert threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sent: list[float] = []

    def fire() -> None:
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(seconds, fire)
    timer.start()
    try:
        yield sent
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)


@pytest.fixture
def proxy(uri):
    p = SilentProxy(uri)
    yield p
    p.close()


def test_ctrl_c_interrupts_a_take_whose_answer_never_comes(proxy, collection):
    d = dispenser.Dispenser.connect(proxy.uri, database=DATABASE, collection=collection)
    q = d.ensure_queue("desk", max=99)
    proxy.silent.set()
    with sigint_after(0.5) as sent, pytest.raises(KeyboardInterrupt) as e:
        started = time.monotonic()
        q.take()
    ended = time.monotonic()
    latency = ended - sent[0]
    # The take's write was sent (the proxy forwarded it) and its answer never came.
    assert e.value.written == "unknown"
    assert ended - started < 1.0, ended - started
    print(f"interrupt latency: {latency * 1000:.1f} ms")


def test_ctrl_c_interrupts_a_read_and_says_nothing_was_written(proxy, collection):
    d = dispenser.Dispenser.connect(proxy.uri, database=DATABASE, collection=collection)
    s = d.ensure("s")
    proxy.silent.set()
    with sigint_after(0.3) as sent, pytest.raises(KeyboardInterrupt) as e:
        s.peek()
    assert e.value.written == "nothing_written"
    assert time.monotonic() - sent[0] < 0.7


def test_a_signal_handler_that_raises_its_own_exception_interrupts_a_draw(proxy, collection):
    class Stop(Exception):
        pass

    def handler(signum, frame):
        raise Stop("asked to stop")

    d = dispenser.Dispenser.connect(proxy.uri, database=DATABASE, collection=collection)
    s = d.ensure("s")
    assert s.next() == 1
    proxy.silent.set()
    previous = signal.signal(signal.SIGUSR1, handler)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1))
    timer.start()
    try:
        with pytest.raises(Stop) as e:
            s.next()
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
    assert e.value.written == "unknown"
    # The draw was dropped: the numbers it may have reserved are a gap, never issued.
    proxy.silent.clear()
    d2 = dispenser.Dispenser.connect(proxy.uri, database=DATABASE, collection=collection)
    assert d2.open("s").next() >= 2
