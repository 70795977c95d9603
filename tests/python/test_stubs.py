"""The type stubs (.pyi) name exactly the methods each class has, in both flavours, and the
asyncio stubs make a coroutine of exactly the calls that return an awaitable."""

from __future__ import annotations

import ast
import asyncio
import inspect
import pathlib

import dispenser
import dispenser.aio

PACKAGE = pathlib.Path(dispenser.__file__).parent
CLASSES = ["Dispenser", "Sequence", "BlockSequence", "StripedSequence", "DailySequence",
           "Gapless", "Queue"]
#: The protocol methods a class has beside its public ones: `with` on the sync flavour,
#: `async with` (and `aclose`) on the asyncio one.
WITH = {"__enter__", "__exit__"}
ASYNC_WITH = {"__aenter__", "__aexit__"}
CLOSABLE = ["Dispenser", "BlockSequence", "StripedSequence"]


def stubbed(stub: str) -> dict[str, dict[str, bool]]:
    """Class -> {method: is it `async def`} from a stub file."""
    tree = ast.parse((PACKAGE / stub).read_text())
    return {
        c.name: {
            f.name: isinstance(f, ast.AsyncFunctionDef)
            for f in c.body
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        for c in tree.body
        if isinstance(c, ast.ClassDef)
    }


def public(cls) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_the_stubs_name_every_method_of_both_flavours():
    sync, aio = stubbed("_dispenser.pyi"), stubbed("aio.pyi")
    for name in CLASSES:
        sync_cls, aio_cls = getattr(dispenser, name), getattr(dispenser.aio, name)
        assert set(sync[name]) - WITH == public(sync_cls), name
        assert set(aio[name]) - ASYNC_WITH == public(aio_cls), name
        assert set(sync[name]) - WITH == set(aio[name]) - ASYNC_WITH - {"aclose"}, name
        assert not any(sync[name].values()), name
        closable = name in CLOSABLE
        assert (WITH <= set(sync[name])) == closable == all(hasattr(sync_cls, m) for m in WITH), name
        assert (ASYNC_WITH <= set(aio[name])) == closable, name
        assert all(hasattr(aio_cls, m) for m in ASYNC_WITH | {"aclose"}) == closable, name
        assert not any(hasattr(sync_cls, m) for m in ASYNC_WITH | {"aclose"}), name
        assert not any(hasattr(aio_cls, m) for m in WITH), name
    for name in ["AdoptSource", "Format", "Issued"]:
        assert set(sync[name]) - {"__init__"} == public(getattr(dispenser, name)), name
        assert getattr(dispenser, name) is getattr(dispenser.aio, name), name


def test_the_asyncio_stubs_await_exactly_the_calls_that_return_awaitables(d, uri):
    async def main():
        ad = await dispenser.aio.Dispenser.connect(uri, database=d.database, collection=d.collection)
        aio = stubbed("aio.pyi")
        s = await ad.ensure("s")
        b = await ad.open_blocks("s")
        handles = {"Dispenser": ad, "Sequence": s, "BlockSequence": b}
        probes = {"next": (), "stats": (), "held": (), "try_next": (), "remaining_hint": (),
                  "peek": ("s",), "block_size": (), "is_closed": (), "ping": ()}
        checked = 0
        for cls, handle in handles.items():
            for method, args in probes.items():
                if method not in aio[cls]:
                    continue
                if cls == "Dispenser" and method == "peek":
                    args = ("s",)
                elif method == "peek":
                    args = ()
                result = getattr(handle, method)(*args)
                awaitable = inspect.isawaitable(result)
                if awaitable:
                    await result
                assert awaitable == aio[cls][method], (cls, method)
                checked += 1
        await b.close()
        assert checked >= 10

    asyncio.run(main())
