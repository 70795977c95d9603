"""A process that forks after first use (gunicorn --preload, Celery prefork,
multiprocessing): the child's handles work, on the child's own runtime, and never hand out
what the parent holds."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
import warnings

import dispenser


def wait_for(pid: int, seconds: float) -> int:
    """The child's exit status; kills it and fails if it hangs."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError(f"the child {pid} hung after fork (killed after {seconds} s)")


def test_a_child_forked_after_use_draws_on_its_own_runtime_without_duplicates(d):
    s = d.ensure("orders")
    blocks = d.open_blocks("orders", size=100)
    parent = [s.next() for _ in range(5)] + [blocks.next()]  # the block client holds 99
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read)
            mine = [s.next() for _ in range(50)] + [blocks.next() for _ in range(50)]
            blocks.close()
            os.write(write, json.dumps(mine).encode())
        except BaseException as e:  # report anything to the parent
            os.write(write, json.dumps({"error": repr(e)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    parent += [s.next() for _ in range(50)] + [blocks.next() for _ in range(50)]
    assert wait_for(pid, 60) == 0
    with os.fdopen(read) as f:
        child = json.loads(f.read())
    assert isinstance(child, list), child
    assert len(child) == 100 and len(parent) == 106
    assert not set(child) & set(parent), sorted(set(child) & set(parent))
    assert len(set(child)) == 100 and len(set(parent)) == 106


_shared = {}


def _draw(k: int) -> list[int]:
    return [_shared["s"].next() for _ in range(20)]


def test_prefork_workers_share_handles_made_before_the_fork(d):
    # As gunicorn --preload and Celery prefork do: handles made at import, used by workers.
    _shared["s"] = d.ensure("jobs")
    first = _shared["s"].next()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with multiprocessing.get_context("fork").Pool(3) as pool:
            results = pool.map_async(_draw, range(6)).get(timeout=60)
    numbers = [first] + [n for r in results for n in r] + [_shared["s"].next()]
    assert len(numbers) == 122 and len(set(numbers)) == 122
