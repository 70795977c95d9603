"""An unknown keyword is refused naming the closest known one.

The extension checks its arguments before a call runs and refuses an unknown keyword with
``TypeError: create() got an unexpected keyword argument 'strat'``. Each public method of
the extension's classes that takes keywords is wrapped once, at import: the same
``TypeError``, its message ending ``; did you mean 'start'?`` when a keyword of that
method is close to the one given (at most 1 + a quarter of its length edits away: letters
inserted, deleted, changed or two side by side swapped). Methods without named parameters
(``next()``) are not wrapped.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any, Callable, Iterable, List, Optional, Tuple, TypeVar, cast

_UNEXPECTED = re.compile(r"got an unexpected keyword argument '([^']*)'")


def _keywords(method: Callable[..., Any]) -> Tuple[str, ...]:
    """The names a call of ``method`` may give as keywords."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(
        p.name
        for p in parameters
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"
    )


def _edits(a: str, b: str) -> int:
    """The edits from ``a`` to ``b``: insertions, deletions, changes, adjacent swaps."""
    before: List[int] = []
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        previous, row = row, [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], before[j - 2] + 1)
        before = previous
    return row[len(b)]


def closest(given: str, known: Iterable[str]) -> Optional[str]:
    """The known name fewest edits from ``given`` (the first of those), if at most 1 + a
    quarter of its length: ``strat`` → ``start``, ``timout`` → ``timeout``."""
    best: Optional[str] = None
    best_edits = 2 + len(given) // 4
    for name in known:
        edits = _edits(given, name)
        if edits < best_edits:
            best, best_edits = name, edits
    return best


def _suggesting(method: Callable[..., Any], known: Tuple[str, ...]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except TypeError as e:
            found = _UNEXPECTED.search(str(e)) if kwargs and len(e.args) == 1 else None
            if found is not None and found.group(1) in kwargs:
                close = closest(found.group(1), known)
                if close is not None:
                    e.args = (f"{e.args[0]}; did you mean '{close}'?",)
            raise

    return call


F = TypeVar("F", bound=Callable[..., Any])


def suggesting(function: F) -> F:
    """``function`` (a Python function: the Beanie field) with the same suggestion."""
    return cast(F, _suggesting(function, _keywords(function)))


def refuse_close(owner: str, given: Iterable[str], known: Iterable[str]) -> None:
    """A ``TypeError`` for the first of ``given`` near one of ``known`` without being it:
    for a function that passes the keywords it does not know on (mongoengine's fields keep
    them as attributes), so that a typo of its own is not taken silently."""
    known = tuple(known)
    for key in given:
        close = closest(key, known) if key not in known else None
        if close is not None:
            raise TypeError(
                f"{owner}() got an unexpected keyword argument '{key}'; did you mean '{close}'?"
            )


def suggest_keywords(classes: Iterable[type]) -> None:
    """Wraps each public method of ``classes`` that takes keywords (see the module)."""
    for cls in classes:
        for name, raw in list(vars(cls).items()):
            if name.startswith("_"):
                continue
            if isinstance(raw, staticmethod):
                known = _keywords(raw.__func__)
                if known:
                    setattr(cls, name, staticmethod(_suggesting(raw.__func__, known)))
            elif callable(raw) and not isinstance(raw, type):
                known = _keywords(raw)
                if known:
                    setattr(cls, name, _suggesting(raw, known))
