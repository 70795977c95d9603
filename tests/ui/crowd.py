"""A crowd of phones, measured (a measurement, not a test): PHONES ticket pages follow one
queue — each took its ticket through the queue's ticket link and holds its ticket's stream
open, as the page does — while TAKERS kiosks take tickets through the service as fast as it
answers and a desk calls the next ticket CALLS times. It reports how soon the board's stream
(`GET /ui/queues/{name}/events`, what the board page reads) showed each call after the call
was answered, how soon the phones were told, and how much the service's memory (VmRSS, read
from /proc) grew from before the phones came to the highest it reached while they followed.

    export "$(scripts/server.sh start)"
    cargo build --release
    python3 tests/ui/crowd.py --dispenser target/release/dispenser [--phones 1000] [--takers 32] [--calls 20]

Needs MONGODB_URI. Starts its own `dispenser serve` on a fresh collection of the database
`dispenser_bench` (with stream caps above the crowd: every phone comes from one address here),
raises its own open-file limit to the hard limit, and prints one JSON object (the figures,
milliseconds and MiB).
"""

import argparse
import asyncio
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ADMIN = "crowd-admin-token-000000001"
KIOSK = "crowd-kiosk-token-000000002"
BOARD = "crowd-board-token-000000003"
LINK = "crowd-link-token-0000000004"
QUEUE = "crowd"


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for process {pid}")


class Http:
    """One kept-alive HTTP/1.1 connection (the service answers with a Content-Length)."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def request(self, method, path, token, body=None, headers=None):
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        data = b"" if body is None else json.dumps(body).encode()
        head = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}",
                f"Authorization: Bearer {token}", f"Content-Length: {len(data)}"]
        if body is not None:
            head.append("Content-Type: application/json")
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        await self.writer.drain()
        status = int((await self.reader.readline()).split()[1])
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        text = await self.reader.readexactly(length)
        return status, json.loads(text) if text else None


async def stream(host, port, path, token, http=None):
    """An event stream's reader and writer, once its answer's head arrived (200 asserted); on
    the connection of `http` when given (as a browser reuses the take's connection)."""
    if http is not None and http.writer is not None:
        reader, writer = http.reader, http.writer
    else:
        reader, writer = await asyncio.open_connection(host, port)
    writer.write((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                  f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n").encode())
    await writer.drain()
    status = (await reader.readline()).split()[1]
    if status != b"200":
        raise SystemExit(f"{path}: HTTP {status.decode()}")
    while await reader.readline() not in (b"\r\n", b""):
        pass
    return reader, writer


class Watcher:
    """Reads a stream to its end, noting when the text `"now_serving_label":"LABEL"` first
    arrived for each label (chunks are scanned with the end of the one before, so a text cut
    between two is found)."""

    def __init__(self, reader_writer):
        # The writer is kept: a stream writer collected closes its connection.
        self.reader, self.writer = reader_writer
        self.seen = {}
        self.task = asyncio.ensure_future(self.run())

    async def run(self):
        tail = b""
        pattern = re.compile(rb'"now_serving_label":"([^"]*)"')
        while chunk := await self.reader.read(65536):
            now = time.monotonic()
            text = tail + chunk
            for m in pattern.finditer(text):
                self.seen.setdefault(m.group(1).decode(), now)
            tail = text[-80:]


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dispenser", default="target/release/dispenser")
    ap.add_argument("--phones", type=int, default=1000)
    ap.add_argument("--takers", type=int, default=32)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--every", type=float, default=0.5, help="seconds between calls")
    args = ap.parse_args()
    if "MONGODB_URI" not in os.environ:
        raise SystemExit("crowd.py: MONGODB_URI is unset (export \"$(scripts/server.sh start)\")")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # Ticket streams may take a quarter of --max-connections.
    conns = 4 * args.phones + 2 * args.takers + 64
    if hard < conns + 128:
        raise SystemExit(f"crowd.py: the open-file limit {hard} is below the {conns + 128} this needs")

    tokens = {"tokens": [
        {"name": "admin", "token": ADMIN, "sequences": [QUEUE],
         "operations": ["create", "peek", "take", "call"]},
        {"name": "kiosk", "token": KIOSK, "sequences": [QUEUE], "operations": ["take"]},
        {"name": "board", "token": BOARD, "sequences": [QUEUE], "operations": ["peek"]},
        {"name": "phones", "token": LINK,
         "ticket_link": {"queue": QUEUE, "takes_per_phone": 1, "takes_per_address": 1_000_000}},
    ]}
    fd, path = tempfile.mkstemp(suffix=".tokens.json")
    os.write(fd, json.dumps(tokens).encode())
    os.close(fd)
    collection = f"crowd_{os.getpid()}_{int(time.time())}"
    service = subprocess.Popen(
        [args.dispenser, "--db", "dispenser_bench", "--collection", collection, "serve",
         "--listen", "127.0.0.1:0", "--tokens", path, "--max-connections", str(conns),
         "--max-ticket-streams-per-address", str(args.phones),
         "--max-ticket-streams-per-queue", str(args.phones)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        line = service.stdout.readline().decode().strip()
        if not line.startswith("listening on http://"):
            raise SystemExit(f"crowd.py: dispenser serve said {line!r}")
        host, port = line.removeprefix("listening on http://").rsplit(":", 1)
        port = int(port)
        return await measure(args, service.pid, host, port)
    finally:
        service.terminate()
        service.wait(30)
        os.remove(path)


async def measure(args, pid, host, port):
    admin = Http(host, port)
    status, body = await admin.request("POST", "/v1/queues", ADMIN,
                                       {"name": QUEUE, "max": 999_999, "format": "T-{n}"})
    if status != 201:
        raise SystemExit(f"queue create: {status} {body}")
    board = Watcher(await stream(host, port, f"/ui/queues/{QUEUE}/events", BOARD))
    # Warm up: a few takes and a call, so the baseline has the service's queue handle.
    for _ in range(3):
        await admin.request("POST", f"/v1/queues/{QUEUE}/take", ADMIN)
    await admin.request("POST", f"/v1/queues/{QUEUE}/call", ADMIN, {"desk": "1"})
    await asyncio.sleep(1)
    baseline = rss_mib(pid)

    # The phones: each takes through the link (its own phone id), then follows its ticket on
    # the same connection.
    async def phone(i):
        http = Http(host, port)
        for attempt in range(20):
            status, t = await http.request("POST", f"/v1/queues/{QUEUE}/take", LINK,
                                           headers={"Idempotency-Key": f"{i:016x}.1"})
            if status == 200:
                break
            await asyncio.sleep(0.2 * (attempt + 1))
        else:
            raise SystemExit(f"phone {i}: take answered {status} {t}")
        return Watcher(await stream(host, port,
                                    f"/ui/queues/{QUEUE}/tickets/{t['serial']}/events", LINK, http))

    started = time.monotonic()
    phones = []
    for first in range(0, args.phones, 100):
        phones += await asyncio.gather(*(phone(i) for i in range(first, min(first + 100, args.phones))))
    opened_s = time.monotonic() - started
    with_phones = rss_mib(pid)

    # The takers, and the desk's calls while they take.
    stop = asyncio.Event()
    counts = {"taken": 0, "refused": 0}

    async def taker(k):
        http = Http(host, port)
        n = 0
        while not stop.is_set():
            n += 1
            status, _ = await http.request("POST", f"/v1/queues/{QUEUE}/take", KIOSK,
                                           headers={"Idempotency-Key": f"kiosk{k}-{n}"})
            counts["taken" if status == 200 else "refused"] += 1

    takers = [asyncio.ensure_future(taker(k)) for k in range(args.takers)]
    peak = with_phones
    board_ms, told_ms, told = [], [], []
    await asyncio.sleep(1)
    for _ in range(args.calls):
        status, called = await admin.request("POST", f"/v1/queues/{QUEUE}/call", ADMIN, {"desk": "1"})
        if status != 200:
            raise SystemExit(f"call: {status} {called}")
        answered, label = time.monotonic(), called["label"]
        await asyncio.sleep(args.every)
        peak = max(peak, rss_mib(pid))
        deadline = time.monotonic() + 5
        while label not in board.seen and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        board_ms.append(max(0.0, (board.seen.get(label, float("inf")) - answered) * 1000))
        times = [p.seen[label] for p in phones if label in p.seen]
        told.append(len(times))
        if times:
            told_ms.append(max(0.0, (max(times) - answered) * 1000))
    stop.set()
    await asyncio.gather(*takers, return_exceptions=True)
    elapsed = args.calls * args.every
    result = {
        "phones": args.phones, "takers": args.takers, "calls": args.calls,
        "phones_opened_s": round(opened_s, 1),
        "board_ms": {"median": round(statistics.median(board_ms)), "max": round(max(board_ms))},
        "phones_told_per_call": {"min": min(told), "max": max(told)},
        "last_phone_told_ms": {"median": round(statistics.median(told_ms)),
                               "max": round(max(told_ms))} if told_ms else None,
        "takes_per_s": round(counts["taken"] / elapsed),
        "takes_refused": counts["refused"],
        "rss_mib": {"before": round(baseline, 1), "with_phones": round(with_phones, 1),
                    "peak": round(peak, 1), "growth": round(peak - baseline, 1)},
    }
    json.dump(result, sys.stdout)
    print()
    return result


if __name__ == "__main__":
    asyncio.run(main())
