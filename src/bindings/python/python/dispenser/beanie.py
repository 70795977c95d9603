"""Beanie documents numbered on insert by a dispenser sequence (``dispenser.aio``)::

    import dispenser.aio, dispenser.beanie
    from beanie import Document, init_beanie
    from pymongo import AsyncMongoClient
    from dispenser.beanie import Numbered, SequenceField

    class Invoice(Numbered, Document):
        number: Optional[int] = SequenceField()           # or SequenceField(gapless=True)

    client = AsyncMongoClient(uri)
    await init_beanie(database=client.shop, document_models=[Invoice])
    dispenser.beanie.use(await dispenser.aio.Dispenser.connect(uri, database="shop"))
    await Invoice(customer="ACME").insert()               # number 1, 2, 3, …

``Numbered`` (before ``Document`` in the bases) numbers each ``SequenceField`` left ``None``
when the document is inserted (``insert()``, ``create()``, ``Document.insert_one``,
``Document.insert_many``: one write for the lot) or saved for the first time (``save()`` of a
document without an id). The sequence is ``"<collection>.<field>"`` unless ``sequence_name``
says otherwise. On first use in a process the field adopts its ``adopt`` source and refuses
(``ConflictError``, code ``already_numbered``) to number a collection whose field holds a
number at or past the sequence's next. Numbers come from a block client (``block=10``, the
default; reserved ahead in the background and grown under load, so an insert costs no round
trip for its number; the numbers of several processes interleave by block, and a process that
ends without closing its dispenser — ``await dispenser.aclose()`` — leaves its block's tail
unused: a gap, never a duplicate); ``block=None`` draws each number in its insert.
``gapless=True`` numbers through a gap-free sequence whose business write is the insert
itself: a number is used if and only if the insert succeeds.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Callable, Iterable, Optional, Union

import pydantic

from . import _keywords, _odm
from ._dispenser import AdoptSource
from ._errors import AlreadyExistsError, BusinessWriteError, InvalidInputError, NotFoundError
from .aio import Dispenser

__all__ = ["DEFAULT_BLOCK", "Numbered", "SequenceField", "use"]

DEFAULT_BLOCK = _odm.DEFAULT_BLOCK

DispenserLike = Union[Dispenser, Callable[[], Dispenser]]

_default: list[DispenserLike] = []

#: The numbered fields of each document class, found on first use.
_numberings: "weakref.WeakKeyDictionary[type, list[_Numbering]]" = weakref.WeakKeyDictionary()


def use(dispenser: DispenserLike) -> None:
    """Makes ``dispenser`` (a ``dispenser.aio.Dispenser``, or a function returning one, called
    on first use) the one every ``SequenceField`` draws from unless it names its own."""
    _default[:] = [dispenser]


class Sequence:
    """What a ``SequenceField`` says: where its numbers come from (the marker in the field's
    metadata; made by ``SequenceField``)."""

    def __init__(
        self,
        sequence_name: Optional[str],
        dispenser: Optional[DispenserLike],
        adopt: Union[bool, AdoptSource],
        block: Union[int, None, _odm.Default],
        gapless: bool,
    ) -> None:
        if not isinstance(adopt, (bool, AdoptSource)):
            raise InvalidInputError(
                f"adopt must be True, False or a dispenser.AdoptSource, not {adopt!r}",
                "invalid_input", "invalid_input",
            )
        size = _odm.block_size(block, gapless, "insert")
        self.sequence_name = sequence_name
        self.dispenser = dispenser
        self.adopt = adopt
        self.block = size
        self.gapless = gapless

    def __repr__(self) -> str:
        return (
            f"SequenceField(sequence_name={self.sequence_name!r}, adopt={self.adopt!r}, "
            f"block={self.block!r}, gapless={self.gapless!r})"
        )


@_keywords.suggesting
def SequenceField(
    sequence_name: Optional[str] = None,
    *,
    dispenser: Optional[DispenserLike] = None,
    adopt: Union[bool, AdoptSource] = False,
    block: Union[int, None, _odm.Default] = _odm.DEFAULT,
    gapless: bool = False,
) -> Any:
    """A field (default ``None``) that ``Numbered`` numbers on insert.

    ``sequence_name``: the dispenser sequence (default ``"<collection>.<field>"``).
    ``dispenser``: the ``dispenser.aio.Dispenser`` (or a function returning one), else the one
    given to ``dispenser.beanie.use``. ``adopt``: ``False`` (the default: nothing), ``True``
    (the highest number the collection's field holds) or a ``dispenser.AdoptSource``,
    adopted on first use in a process before the check. ``block``: hand numbers out from a
    block client reserving this many at a time (``DEFAULT_BLOCK``, 10, unless said; grown
    under load), or ``None``: draw each number in its insert. ``gapless``: number through a
    gap-free sequence, the insert as its business write (the documents must live in the
    dispenser's database; no block).
    """
    info: Any = pydantic.Field(default=None)
    info.metadata.append(Sequence(sequence_name, dispenser, adopt, block, gapless))
    return info


class _Numbering:
    """One numbered field of one document class, made ready on first use in a process."""

    def __init__(self, cls: Any, field: str, spec: Sequence) -> None:
        self.cls = cls
        self.field = field
        self.spec = spec
        self.handle: Any = None
        # One set-up at a time on each event loop (a lock belongs to its loop).
        self.locks: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]" = (
            weakref.WeakKeyDictionary()
        )

    @property
    def db_field(self) -> str:
        info = self.cls.model_fields[self.field]
        return info.alias or self.field

    def name(self) -> str:
        return self.spec.sequence_name or f"{self.cls.get_collection_name()}.{self.db_field}"

    def dispenser(self) -> Dispenser:
        d = self.spec.dispenser if self.spec.dispenser is not None else (_default[0] if _default else None)
        if d is None:
            raise InvalidInputError(
                "no dispenser for the Beanie SequenceFields: call dispenser.beanie.use("
                "await dispenser.aio.Dispenser.connect(uri, database=…)) at start-up, or give "
                "the field one (SequenceField(dispenser=…))",
                "invalid_input", "invalid_input",
            )
        return d if isinstance(d, Dispenser) else d()

    def collection(self) -> Any:
        return self.cls.get_pymongo_collection()

    def source(self) -> Optional[AdoptSource]:
        if self.spec.adopt is False:
            return None
        if self.spec.adopt is True:
            coll = self.collection()
            return AdoptSource.highest(coll.name, self.db_field).in_database(coll.database.name)
        return self.spec.adopt

    async def highest(self) -> Optional[int]:
        coll = self.collection()
        flt, sort, projection = _odm.highest_query(self.db_field)
        doc = await coll.find_one(flt, sort=sort, projection=projection)
        return _odm.highest_of(doc, self.db_field, f"field {self.db_field!r} of {coll.name!r}")

    async def refuse_if_numbered(self, highest: Optional[int], next_number: Optional[int]) -> None:
        coll, name = self.collection(), self.name()
        _odm.refuse_if_numbered(
            collection=coll.name,
            field=self.db_field,
            highest=highest,
            sequence=name,
            next_number=next_number,
            gapless=self.spec.gapless,
            adopt_hint=_odm.adopt_hint(name, coll.name, self.db_field, "SequenceField"),
        )

    async def ready(self) -> Any:
        """The handle numbers come from, made (with the adopt and the check) by the first
        task that needs it; the others wait for it."""
        if self.handle is not None:
            return self.handle
        loop = asyncio.get_running_loop()
        lock = self.locks.setdefault(loop, asyncio.Lock())
        async with lock:
            if self.handle is None:
                self.handle = await (self._make_gapless() if self.spec.gapless else self._make_plain())
        return self.handle

    async def _make_plain(self) -> Any:
        d, name = self.dispenser(), self.name()
        sequence = await d.ensure(name)
        source = self.source()
        if source is not None:
            await d.adopt(name, source)
        # The highest number first, the sequence's next after: a number drawn meanwhile (by
        # another process) is below that next.
        highest = await self.highest()
        await self.refuse_if_numbered(highest, (await sequence.peek())["next"])
        if self.spec.block:
            return sequence.into_blocks(size=self.spec.block)
        return sequence

    async def _make_gapless(self) -> Any:
        d, name, coll = self.dispenser(), self.name(), self.collection()
        if coll.database.name != d.database:
            raise InvalidInputError(
                f"the documents of {self.cls.__name__} live in the database {coll.database.name!r}, "
                f"not the dispenser's {d.database!r}: a gap-free sequence's documents live in "
                f"the dispenser's database",
                "invalid_input", "invalid_input",
            )
        highest = await self.highest()
        try:
            g = await d.open_gapless(name)
        except NotFoundError:
            start = max(highest or 0, await self._source_number()) + 1
            try:
                g = await d.create_gapless(name, collection=coll.name, field=self.db_field, start=start)
            except AlreadyExistsError:
                g = await d.open_gapless(name)
        state = await g.peek()
        # While a holder issues, its numbers run ahead of `next` until confirmed: checked
        # when nobody holds the sequence.
        if state["lease"] is None:
            await self.refuse_if_numbered(highest, state["next"])
        return g

    async def _source_number(self) -> int:
        source = self.source()
        if source is None:
            return 0
        kind, database, collection, flt, field = _odm.source_query(source)
        db = self.collection().database
        if database is not None:
            db = db.client[database]
        coll = db[collection]
        if kind == "highest":
            q, sort, projection = _odm.highest_query(field or "")
            doc = await coll.find_one(q, sort=sort, projection=projection)
        else:
            doc = await coll.find_one(flt, projection={field: 1})
        return _odm.highest_of(doc, field or "", repr(source)) or 0


class Numbered:
    """A mixin for Beanie documents (put it before ``Document``): numbers each
    ``SequenceField`` that is ``None`` when the document is inserted, or saved for the first
    time."""

    @classmethod
    def _numbering(cls) -> list[_Numbering]:
        found = _numberings.get(cls)
        if found is None:
            found = []
            for name, info in cls.model_fields.items():  # type: ignore[attr-defined]
                for m in info.metadata:
                    if isinstance(m, Sequence):
                        found.append(_Numbering(cls, name, m))
            if sum(n.spec.gapless for n in found) > 1:
                raise InvalidInputError(
                    f"{cls.__name__} has two gap-free SequenceFields; a document takes one "
                    f"gap-free number",
                    "invalid_input", "invalid_input",
                )
            _numberings[cls] = found
        return found

    async def _number_plain(self) -> None:
        for n in self._numbering():
            if not n.spec.gapless and getattr(self, n.field) is None:
                handle = await n.ready()
                # A block client hands a number out from memory without a round trip of the loop.
                number = handle.try_next() if n.spec.block else None
                if number is None:
                    number = await handle.next()
                setattr(self, n.field, number)

    def _gapless_numbering(self) -> Optional[_Numbering]:
        for n in self._numbering():
            if n.spec.gapless and getattr(self, n.field) is None:
                return n
        return None

    async def _issue(self, n: _Numbering, write: Callable[[], Any]) -> Any:
        g = await n.ready()

        async def business(number: int) -> Any:
            setattr(self, n.field, number)
            try:
                return await write()
            except BaseException:
                setattr(self, n.field, None)
                raise

        try:
            return (await g.issue(business)).value
        except BusinessWriteError as e:
            if e.written == "nothing_written" and e.__cause__ is not None:
                raise e.__cause__ from None
            raise

    async def insert(self, **kwargs: Any) -> Any:
        await self._number_plain()
        n = self._gapless_numbering()
        if n is None:
            return await super().insert(**kwargs)  # type: ignore[misc]
        return await self._issue(n, lambda: super(Numbered, self).insert(**kwargs))  # type: ignore[misc]

    async def save(self, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "id", None) is not None:
            return await super().save(*args, **kwargs)  # type: ignore[misc]
        await self._number_plain()
        n = self._gapless_numbering()
        if n is None:
            return await super().save(*args, **kwargs)  # type: ignore[misc]
        return await self._issue(n, lambda: super(Numbered, self).save(*args, **kwargs))  # type: ignore[misc]

    @classmethod
    async def insert_many(cls, documents: Iterable[Any], *args: Any, **kwargs: Any) -> Any:
        documents = list(documents)
        for n in cls._numbering():
            bare = [doc for doc in documents if getattr(doc, n.field) is None]
            if not bare:
                continue
            if n.spec.gapless:
                raise InvalidInputError(
                    f"insert_many cannot number the gap-free field {n.field!r}: each number is "
                    f"used by its own insert; insert the documents one by one",
                    "invalid_input", "invalid_input",
                )
            handle = await n.ready()
            while bare:
                if n.spec.block:
                    numbers: list[int] = [await handle.next() for _ in bare]
                else:
                    # One write for the lot (a cyclic sequence stops a run at its wrap).
                    numbers = list(await handle.next_n(len(bare)))
                for doc, number in zip(bare, numbers):
                    setattr(doc, n.field, number)
                bare = bare[len(numbers):]
        return await super().insert_many(documents, *args, **kwargs)  # type: ignore[misc]
