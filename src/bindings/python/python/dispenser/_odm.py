"""What the ODM fields (``dispenser.mongoengine``, ``dispenser.beanie``) share: the check that
refuses to number a collection already numbered past a sequence, and reading where an
adopt source stands for a gap-free sequence's first number. Not for applications."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ._errors import ConflictError, InvalidInputError

#: The BSON number types a field's highest number is read among (as the core's adopt does).
NUMBERS = {"$type": ["int", "long", "double", "decimal"]}

#: The block size of a ``SequenceField`` that does not say (``block=None``: no block).
DEFAULT_BLOCK = 10


class Default:
    """``block`` not given: ``DEFAULT_BLOCK``, or no block in gap-free mode."""

    def __repr__(self) -> str:
        return f"{DEFAULT_BLOCK} (the default)"


DEFAULT = Default()


def block_size(block: Any, gapless: bool, insert: str) -> Optional[int]:
    """The block size a field asked for ``block`` numbers with (``None``: no block), checked:
    a gap-free field takes none; a size is a whole number of 1 or more."""
    if gapless and block is not None and not isinstance(block, Default):
        raise InvalidInputError(
            f"a gap-free SequenceField takes each number in its {insert}; block is for plain mode",
            "invalid_input", "invalid_input",
        )
    if isinstance(block, Default):
        return None if gapless else DEFAULT_BLOCK
    if block is not None and (isinstance(block, bool) or not isinstance(block, int) or block < 1):
        raise InvalidInputError(
            f"block must be a block size of 1 or more, not {block!r}",
            "invalid_input", "invalid_input",
        )
    return block


def whole(value: Any, where: str) -> Optional[int]:
    """A number read from a document, as an int (``None`` when absent)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidInputError(
            f"{where} holds {value!r}, not a whole number; nothing was numbered",
            "invalid_input", "invalid_input",
        )
    if isinstance(value, int):
        return value
    try:
        as_float = float(str(value))
    except ValueError:
        as_float = float("nan")
    if as_float.is_integer():
        return int(as_float)
    raise InvalidInputError(
        f"{where} holds {value!r}, not a whole number; nothing was numbered",
        "invalid_input", "invalid_input",
    )


def highest_query(field: str) -> tuple[dict[str, Any], list[tuple[str, int]], dict[str, int]]:
    """The filter, sort and projection that find the document with the highest number in
    ``field``."""
    return {field: NUMBERS}, [(field, -1)], {field: 1, "_id": 0}


def highest_of(doc: Optional[Mapping[str, Any]], field: str, where: str) -> Optional[int]:
    """The number of ``field`` in the document ``highest_query`` found."""
    if doc is None:
        return None
    value: Any = doc
    for part in field.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return whole(value, where)


def refuse_if_numbered(
    *,
    collection: str,
    field: str,
    highest: Optional[int],
    sequence: str,
    next_number: Optional[int],
    gapless: bool,
    adopt_hint: str,
) -> None:
    """Raises ``ConflictError`` (code ``already_numbered``) when ``collection`` holds a
    number in ``field`` at or past the next number the sequence would issue: numbering it
    would repeat numbers."""
    if highest is None or next_number is None or highest < next_number:
        return
    kind = "gap-free sequence" if gapless else "sequence"
    raise ConflictError(
        f"collection {collection!r} already holds the number {highest} in field {field!r}, "
        f"at or past the next number {next_number} of {kind} {sequence!r}: numbering it "
        f"would repeat numbers. Adopt what numbered it first: {adopt_hint}; "
        f"nothing was numbered",
        "already_numbered",
        "conflict",
    )


def adopt_hint(sequence: str, collection: str, field: str, odm: str) -> str:
    """The message's way out: the field's `adopt` option, or adopting by hand."""
    return (
        f"{odm}(adopt=dispenser.AdoptSource.highest({collection!r}, {field!r})) (or the "
        f"source that issued the numbers: mongoengine's counter, mongoose-sequence's, a "
        f"counter of your own), or once by hand: dispenser.Dispenser.adopt({sequence!r}, "
        f"dispenser.AdoptSource.highest({collection!r}, {field!r}))"
    )


def source_query(source: Any) -> tuple[str, Optional[str], str, dict[str, Any], Optional[str]]:
    """Where an ``AdoptSource`` stands, to read it for a gap-free sequence's start:
    ``(kind, database, collection, filter, field)``; ``kind`` is ``"highest"`` (then
    ``field`` is sorted on) or a counter (``filter`` finds it, ``field`` holds the last
    number issued)."""
    kind = source.kind
    if kind == "mongoose-sequence" and source.scoped:
        raise InvalidInputError(
            "a scoped mongoose-sequence source numbers scopes; a gap-free field numbers one "
            "sequence: adopt it with an unscoped source",
            "invalid_input", "invalid_input",
        )
    return kind, source.database, source.collection, dict(source.filter or {}), source.field
