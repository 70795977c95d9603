"""The exceptions of dispenser: one class per kind of the core's errors.

Every exception carries the core's stable ``code`` (``"no_such_sequence"``, ``"exhausted"``,
``"queue_full"``, …; a code is never renamed), its ``kind`` (the class's, as a word) and the
one-line ``message``. Catch a class to branch on a kind, compare ``code`` for the exact case.

``written`` says what the failed call wrote: ``"nothing_written"`` (making it again is safe),
``"written"`` (the write was made; reading its answer back failed) or ``"unknown"`` (a write
was sent and its reply never came: find out — ``peek``, the gap-free audit, the same request
id — before making it again where that matters).
"""

from __future__ import annotations

__all__ = [
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
]


class DispenserError(Exception):
    """Every error of dispenser: ``code`` (stable), ``kind``, ``message`` and ``written``."""

    code: str
    kind: str
    message: str
    written: str

    def __init__(
        self, message: str, code: str, kind: str, written: str = "nothing_written"
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.kind = kind
        self.written = written

    def __reduce__(self) -> tuple[type, tuple[str, str, str, str]]:  # picklable, with its fields
        return (type(self), (self.message, self.code, self.kind, self.written))


class InvalidInputError(DispenserError, ValueError):
    """The input was refused (a name, a spec, an argument); nothing was written."""


class NotFoundError(DispenserError, LookupError):
    """The sequence or queue does not exist."""


class AlreadyExistsError(DispenserError):
    """One of that name exists already."""


class ConflictError(DispenserError):
    """The stored state refuses the change (another spec, going backwards, a remap)."""


class ExhaustedError(DispenserError):
    """A non-cyclic sequence has fewer numbers left than asked; nothing was written."""


class QueueRefusedError(DispenserError):
    """The queue refuses: full, nobody waiting, the ticket does not wait, nothing shown."""


class ContentionError(DispenserError):
    """Every try of the retry budget lost a race; nothing was drawn: try again."""


class UnavailableError(DispenserError):
    """The database failed or did not answer in time, or the handle was closed."""


class CorruptError(DispenserError):
    """A stored document cannot be read (see ``dispenser check``)."""


class BusinessWriteError(DispenserError):
    """The business write of a gap-free number failed.

    With ``written == "nothing_written"`` the number was released (the next caller gets it);
    with ``"unknown"`` the write may have landed (see ``Gapless.audit``). The exception the
    write raised is its ``__cause__``.
    """
