"""mongoengine's ``SequenceField``, numbered by a dispenser sequence.

Switching over is one line — the import::

    import dispenser, mongoengine
    from dispenser.mongoengine import SequenceField      # was: from mongoengine import SequenceField

    mongoengine.connect("shop", host=uri)
    dispenser.mongoengine.use(dispenser.Dispenser.connect(uri, database="shop"))

    class Invoice(mongoengine.Document):
        number = SequenceField()                          # the same arguments as mongoengine's

On its first use in a process the field makes the sequence ``"<sequence_name>.<field>"`` (the
id of mongoengine's counter) in the dispenser, adopts mongoengine's own counter
(``adopt=True``, the default: the sequence moves past the last number it issued), and reads
the highest number the collection's field holds: if that is at or past the sequence's next
number it refuses to number anything (``ConflictError``, code ``already_numbered``, naming the
adopt to make). Numbers are drawn on save (or on first read of the attribute, as mongoengine
does) from a block client (``block=10``, the default): numbers are reserved ahead, a block
at a time, in the background, so a save costs no round trip for its number; under load the
blocks grow to last the reservation's round trip. Within a process the numbers rise; the
numbers of several processes interleave by block; a process that ends without closing its
dispenser (``Dispenser.close()``, ``with``, or the interpreter's exit, where the fields close
their block clients) leaves its block's tail unused — a gap, never a duplicate.
``block=None`` draws each number with ``Sequence.next()`` in its save (one round trip before
the insert, shared by concurrent saves): numbers in the order they were drawn across
processes. ``gapless=True`` numbers through a gap-free sequence whose business write is the
save's own insert: a number is used if and only if the insert succeeds.
"""

from __future__ import annotations

import atexit
import contextvars
import threading
import weakref
from typing import Any, Callable, Optional, Union

from mongoengine.connection import DEFAULT_CONNECTION_NAME, get_db  # type: ignore[import-untyped]
from mongoengine.fields import SequenceField as _SequenceField  # type: ignore[import-untyped]

from . import _keywords, _odm
from ._dispenser import AdoptSource, Dispenser
from ._errors import (
    AlreadyExistsError,
    BusinessWriteError,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)

__all__ = ["DEFAULT_BLOCK", "SequenceField", "use"]

DEFAULT_BLOCK = _odm.DEFAULT_BLOCK

#: The fields whose block clients the interpreter's exit closes (giving their tails back).
_fields_with_blocks: "weakref.WeakSet[SequenceField]" = weakref.WeakSet()

DispenserLike = Union[Dispenser, Callable[[], Dispenser]]

_registry: dict[str, DispenserLike] = {}
_registry_lock = threading.Lock()

#: The document whose save() runs in this context (a gap-free field numbers it in the save's
#: insert).
_saving: contextvars.ContextVar[Any] = contextvars.ContextVar("dispenser_mongoengine_saving", default=None)


def use(dispenser: DispenserLike, *, alias: str = DEFAULT_CONNECTION_NAME) -> None:
    """Makes ``dispenser`` (a ``dispenser.Dispenser``, or a function returning one, called on
    first use) the one the fields of documents on the mongoengine connection ``alias`` draw
    from, unless a field names its own (``SequenceField(dispenser=…)``)."""
    with _registry_lock:
        _registry[alias] = dispenser


def _resolve(d: Optional[DispenserLike], alias: str) -> Dispenser:
    if d is None:
        with _registry_lock:
            d = _registry.get(alias)
    if d is None:
        raise InvalidInputError(
            f"no dispenser for the mongoengine connection {alias!r}: call "
            f"dispenser.mongoengine.use(dispenser.Dispenser.connect(uri, database=…)) at start-up, "
            f"or give the field one (SequenceField(dispenser=…))",
            "invalid_input", "invalid_input",
        )
    return d if isinstance(d, Dispenser) else d()


# The keywords of SequenceField: mongoengine's SequenceField's and this one's.
_KEYWORDS = (
    "collection_name", "db_alias", "sequence_name", "value_decorator",
    "dispenser", "adopt", "block", "gapless",
)


class SequenceField(_SequenceField):  # type: ignore[misc]
    """mongoengine's ``SequenceField`` (the same arguments: ``collection_name``, the counter
    collection — here the one to adopt from —, ``db_alias``, ``sequence_name``,
    ``value_decorator``), numbered by a dispenser sequence named like mongoengine's counter,
    ``"<sequence_name>.<field>"``.

    ``dispenser``: the ``dispenser.Dispenser`` (or a function returning one) to draw from,
    else the one given to ``dispenser.mongoengine.use`` for ``db_alias``. ``adopt``: ``True``
    (mongoengine's own counter of this field), ``False`` (nothing), or a
    ``dispenser.AdoptSource``: adopted on first use in a process, before the check that
    refuses a collection numbered past the sequence. ``block``: hand numbers out from a block
    client reserving this many at a time (``DEFAULT_BLOCK``, 10, unless said; grown under
    load), or ``None``: draw each number in its save. ``gapless``: number through a gap-free
    sequence, the save's insert as its business write (the documents must live in the
    dispenser's database; numbers stay ints: no ``value_decorator``; no block).
    """

    def __init__(
        self,
        collection_name: Optional[str] = None,
        db_alias: Optional[str] = None,
        sequence_name: Optional[str] = None,
        value_decorator: Optional[Callable[[int], Any]] = None,
        *args: Any,
        dispenser: Optional[DispenserLike] = None,
        adopt: Union[bool, AdoptSource] = True,
        block: Union[int, None, _odm.Default] = _odm.DEFAULT,
        gapless: bool = False,
        **kwargs: Any,
    ) -> None:
        # mongoengine keeps a field's unknown keywords as attributes: one near a keyword of
        # this field is a typo, refused rather than taken silently.
        _keywords.refuse_close("SequenceField", kwargs, _KEYWORDS)
        super().__init__(collection_name, db_alias, sequence_name, value_decorator, *args, **kwargs)
        if gapless and value_decorator is not None and value_decorator is not int:
            raise InvalidInputError(
                "a gap-free SequenceField keeps its numbers as ints (its unique index and "
                "audit count them): leave value_decorator out",
                "invalid_input", "invalid_input",
            )
        size = _odm.block_size(block, gapless, "save")
        if not isinstance(adopt, (bool, AdoptSource)):
            raise InvalidInputError(
                f"adopt must be True, False or a dispenser.AdoptSource, not {adopt!r}",
                "invalid_input", "invalid_input",
            )
        self._dispenser_given = dispenser
        self._adopt = adopt
        self._block = size
        self.gapless = gapless
        self._ready_lock = threading.Lock()
        self._handle: Any = None
        if size is not None:
            _fields_with_blocks.add(self)

    # --- what mongoengine calls

    def _set_owner_document(self, owner_document: Any) -> None:
        super()._set_owner_document(owner_document)
        if self.gapless and owner_document is not None:
            _number_in_save(owner_document, self)

    def generate(self) -> Any:
        """The next number (decorated): drawn from the dispenser sequence. In gap-free mode
        the save's insert takes it, so this is only reached outside a save, and refused."""
        if self.gapless:
            if _saving.get() is not None:
                return None  # the insert numbers it (see _number_in_save)
            raise InvalidInputError(
                f"a gap-free SequenceField ({self._sequence_id()}) numbers a document in its "
                f"save(): the number is used if and only if that insert succeeds; "
                f"bulk inserts and to_mongo() of an unsaved document get none",
                "invalid_input", "invalid_input",
            )
        while True:
            handle = self._ready()
            try:
                # A block client hands a number out from memory without releasing the GIL.
                number = handle.try_next() if self._block else None
                if number is None:
                    number = handle.next()
            except UnavailableError as e:
                # Closed by get_next_value / set_next_value meanwhile: the next client.
                if e.code == "closed" and self._block and handle is not self._handle:
                    continue
                raise
            return self.value_decorator(number)

    def __get__(self, instance: Any, owner: Any) -> Any:
        if self.gapless:
            # Never numbered by a read: the save's insert numbers it.
            return super(_SequenceField, self).__get__(instance, owner)
        return super().__get__(instance, owner)

    def __set__(self, instance: Any, value: Any) -> None:
        if self.gapless:
            super(_SequenceField, self).__set__(instance, value)
        else:
            super().__set__(instance, value)

    def to_python(self, value: Any) -> Any:
        if self.gapless:
            return value
        return super().to_python(value)

    def set_next_value(self, value: int) -> Any:
        """Makes ``value + 1`` the next number (as mongoengine's does); never backwards
        (``ConflictError``, code ``would_go_backwards``). With a block, this process's block
        client is closed first (giving back what it holds, when no other process drew since),
        so this process's next save gets ``value + 1``; other processes finish their blocks."""
        handle = self._ready()
        if self.gapless:
            raise InvalidInputError(
                "a gap-free sequence's next number is the lowest not used: it is not set",
                "invalid_input", "invalid_input",
            )
        self._give_back()
        self._dispenser().open(self._sequence_id()).reset(value + 1)
        return self.value_decorator(value)

    def get_next_value(self) -> Any:
        """The number the next save gets, for previewing (another save may take it first).
        With a block, this process's block client is closed first (giving back what it
        holds, when no other process drew since; the next save opens another, a few round
        trips: a preview is for an operator, not for polling)."""
        handle = self._ready()
        if self.gapless:
            return handle.peek()["next"]
        self._give_back()
        state = self._dispenser().peek(self._sequence_id())
        return self.value_decorator(state["next"])

    def close(self) -> Any:
        """Closes this field's block client in this process, giving back the numbers it holds
        (when no other process drew since): ``{"given_back", "lost"}``. The next save opens
        another. The interpreter's exit does it for every field."""
        return self._give_back()

    # --- the dispenser side

    def _give_back(self) -> Any:
        if not self._block:
            return {"given_back": 0, "lost": 0}
        with self._ready_lock:
            handle, self._handle = self._handle, None
        if handle is None:
            return {"given_back": 0, "lost": 0}
        return handle.close()

    def _sequence_id(self) -> str:
        return f"{self.get_sequence_name()}.{self.name}"

    def _dispenser(self) -> Dispenser:
        return _resolve(self._dispenser_given, self.db_alias)

    def _collection(self) -> Any:
        """The owner's collection (``None`` for an abstract owner: its subclasses have one
        each)."""
        owner = self.owner_document
        if owner is None or owner._meta.get("abstract"):
            return None
        return owner._get_collection()

    def _source(self) -> Optional[AdoptSource]:
        if self._adopt is False:
            return None
        if self._adopt is True:
            return (
                AdoptSource.mongoengine(self._sequence_id())
                .in_collection(self.collection_name)
                .in_database(get_db(self.db_alias).name)
            )
        return self._adopt

    def _ready(self) -> Any:
        """The handle numbers come from, made (with the adopt and the check) on first use."""
        handle = self._handle
        if handle is not None:
            return handle
        with self._ready_lock:
            if self._handle is None:
                self._handle = self._make_gapless() if self.gapless else self._make_plain()
            return self._handle

    def _highest(self) -> Optional[int]:
        coll = self._collection()
        if coll is None:
            return None
        flt, sort, projection = _odm.highest_query(self.db_field)
        doc = coll.find_one(flt, sort=sort, projection=projection)
        return _odm.highest_of(doc, self.db_field, f"field {self.db_field!r} of {coll.name!r}")

    def _refuse_if_numbered(self, highest: Optional[int], next_number: Optional[int]) -> None:
        coll = self._collection()
        if coll is None:
            return
        name = self._sequence_id()
        _odm.refuse_if_numbered(
            collection=coll.name,
            field=self.db_field,
            highest=highest,
            sequence=name,
            next_number=next_number,
            gapless=self.gapless,
            adopt_hint=_odm.adopt_hint(name, coll.name, self.db_field, "SequenceField"),
        )

    def _make_plain(self) -> Any:
        d = self._dispenser()
        name = self._sequence_id()
        sequence = d.ensure(name)
        source = self._source()
        if source is not None:
            d.adopt(name, source)
        # The highest number first, the sequence's next after: a number drawn meanwhile (by
        # another process) is below that next.
        highest = self._highest()
        self._refuse_if_numbered(highest, sequence.peek()["next"])
        if self._block:
            return sequence.into_blocks(size=self._block)
        return sequence

    def _make_gapless(self) -> Any:
        d = self._dispenser()
        owner = self.owner_document
        database = owner._get_db().name
        if database != d.database:
            raise InvalidInputError(
                f"the documents of {owner.__name__} live in the database {database!r}, not the "
                f"dispenser's {d.database!r}: a gap-free sequence's documents live in the "
                f"dispenser's database",
                "invalid_input", "invalid_input",
            )
        name = self._sequence_id()
        collection = owner._get_collection_name()
        highest = self._highest()
        try:
            g = d.open_gapless(name)
        except NotFoundError:
            start = max(highest or 0, self._source_number()) + 1
            try:
                g = d.create_gapless(name, collection=collection, field=self.db_field, start=start)
            except AlreadyExistsError:
                g = d.open_gapless(name)
        state = g.peek()
        # While a holder issues, its numbers run ahead of `next` until confirmed: checked
        # when nobody holds the sequence.
        if state["lease"] is None:
            self._refuse_if_numbered(highest, state["next"])
        return g

    def _source_number(self) -> int:
        """The last number the adopt source issued (0 when none)."""
        source = self._source()
        if source is None:
            return 0
        kind, database, collection, flt, field = _odm.source_query(source)
        db = get_db(self.db_alias)
        if database is not None:
            db = db.client[database]
        coll = db[collection]
        where = f"{source!r}"
        if kind == "highest":
            q, sort, projection = _odm.highest_query(field or "")
            got = _odm.highest_of(coll.find_one(q, sort=sort, projection=projection), field or "", where)
        else:
            doc = coll.find_one(flt, projection={field: 1})
            got = _odm.highest_of(doc, field or "", where)
        return got or 0

    def _issue_insert(self, document: Any, son: Any, insert: Callable[[], Any]) -> Any:
        """The save's insert as the business write of a gap-free number."""
        g = self._ready()
        name, db_field = self.name, self.db_field

        def write(n: int) -> Any:
            son[db_field] = n
            document._data[name] = n
            try:
                return insert()
            except BaseException:
                son.pop(db_field, None)
                document._data[name] = None
                raise

        try:
            return g.issue(write).value
        except BusinessWriteError as e:
            # Released: what the insert raised is the save's error, as mongoengine maps it
            # (a duplicate _id is its NotUniqueError).
            if e.written == "nothing_written" and e.__cause__ is not None:
                raise e.__cause__ from None
            raise


def _number_in_save(owner: Any, field: SequenceField) -> None:
    """Makes the saves of ``owner`` (and its subclasses) number a new document in their
    insert: ``save`` marks the document being saved, ``_save_create`` runs the insert as
    the gap-free number's business write."""
    if getattr(owner, "_dispenser_gapless_field", None) is not None:
        raise InvalidInputError(
            f"{owner.__name__} has two gap-free SequenceFields; a document takes one gap-free number",
            "invalid_input", "invalid_input",
        )
    owner._dispenser_gapless_field = field
    save, save_create = owner.save, owner._save_create

    def saving(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = _saving.set(self)
        try:
            return save(self, *args, **kwargs)
        finally:
            _saving.reset(token)

    def creating(self: Any, doc: Any, force_insert: Any, write_concern: Any) -> Any:
        def insert() -> Any:
            return save_create(self, doc, force_insert, write_concern)

        if _saving.get() is not self or self._data.get(field.name) is not None:
            return insert()
        return field._issue_insert(self, doc, insert)

    saving.__doc__, creating.__doc__ = save.__doc__, save_create.__doc__
    owner.save, owner._save_create = saving, creating


@atexit.register
def _close_blocks() -> None:
    """At the interpreter's exit: every field's block client gives back what it holds."""
    for field in list(_fields_with_blocks):
        try:
            field.close()
        except Exception:  # noqa: BLE001 - the dispenser may be closed or the database gone
            pass
