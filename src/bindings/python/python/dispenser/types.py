"""The shapes of what dispenser returns: each state, ticket, report and answer is a plain
``dict`` at run time, typed here as a ``TypedDict`` (the fields the command line's
``--json`` and the HTTP service show, from the core's ``to_json``). Import them for
annotations::

    from dispenser.types import SequenceState, Ticket

    def show(t: Ticket) -> str:
        return f"{t['label']} ({t['position']} ahead)"

Times are RFC 3339 strings; durations are seconds.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, Tuple, TypedDict

__all__ = [
    "StripeOf",
    "Usage",
    "SequenceState",
    "Stats",
    "CloseReport",
    "Adopted",
    "Altered",
    "HistoryEntry",
    "Lease",
    "Void",
    "GaplessState",
    "Released",
    "Audit",
    "Ticket",
    "CallEntry",
    "DeskEntry",
    "WaitingEntry",
    "HourEntry",
    "QueueState",
    "DoctorReport",
]


class StripeOf(TypedDict):
    """Which stripe of a striped sequence a document is."""

    index: int
    count: int


class Usage(TypedDict):
    """How fast a sequence is used, from the per-day counts its writes carry."""

    fraction_used: float
    remaining: int
    rate_per_sec: Optional[float]
    exhausted_in_secs: Optional[int]
    wraps_per_day: Optional[float]
    history_secs: Optional[int]
    issued_by_day: Dict[str, int]


class SequenceState(TypedDict):
    """A sequence's stored state (``peek``, ``list``, ``advance_to``, ``reset``, ``alter``)."""

    name: str
    value: int
    next: Optional[int]
    remaining: int
    step: int
    min: int
    max: int
    cycle: bool
    cycles: int
    version: int
    created_at: Optional[str]
    updated_at: Optional[str]
    format: Optional[str]
    start: Optional[int]
    stripe: Optional[StripeOf]
    incarnation: Optional[str]
    usage: Usage


class Stats(TypedDict):
    """What a handle did so far (``stats()``)."""

    issued: int
    writes: int
    conflicts: int
    retries: int
    round_trips: int
    fallbacks: int
    optimistic_writes: int
    pessimistic_writes: int
    block_refills: int
    waits: int
    batches: int
    batched_calls: int
    coalesced_calls: int
    max_batch: int
    cas_mode: str


class CloseReport(TypedDict):
    """What closing a block client (or a dispenser, summed over its block clients) did."""

    given_back: int
    lost: int


class Adopted(TypedDict):
    """What ``adopt`` did to one sequence: the last number the source issued (``None``: it
    holds none), whether the sequence moved, its state afterwards."""

    name: str
    highest: Optional[int]
    moved: bool
    state: SequenceState


class Altered(TypedDict):
    """A setting an ``ensure`` found changed by an ``alter`` and kept as stored (a handle's
    ``altered``)."""

    setting: str
    stored: str
    asked: str


class HistoryEntry(TypedDict):
    """One admin operation in a history (``history()``)."""

    id: str
    kind: str
    name: str
    stripe: Optional[int]
    template: Optional[str]
    key: Optional[str]
    op: str
    params: Any
    who: Optional[str]
    at: str
    clock: str
    before: Any
    after: Any
    outcome: str
    error: Optional[str]
    ended_at: Optional[str]
    cursor: str


class Lease(TypedDict):
    """The lease on a gap-free sequence's next number."""

    number: int
    holder: str
    expires: str
    waiters: bool


class Void(TypedDict):
    """A number voided on purpose."""

    number: int
    reason: str
    at: str


class GaplessState(TypedDict):
    """A gap-free sequence's state (``Gapless.peek``, ``Gapless.alter``)."""

    name: str
    collection: str
    field: str
    void_field: str
    next: int
    max_lease_seconds: float
    unique_index: bool
    lease: Optional[Lease]
    lease_expired: bool
    server_time: str
    voided: List[Void]


class Released(TypedDict, total=False):
    """What ``Gapless.release`` did, as every surface answers it: ``{"outcome": "voided",
    "number": n}`` or ``{"outcome": "used", "first": n, "last": m}``."""

    outcome: Literal["voided", "used"]
    number: int
    first: int
    last: int


class Audit(TypedDict):
    """Every number of a business collection's field accounted for (``audit``)."""

    clean: bool
    numbers: int
    first: Optional[int]
    last: Optional[int]
    missing: int
    gaps: List[Tuple[int, int]]
    duplicated: int
    duplicates: List[Tuple[int, int]]
    not_integer: int
    voided: int
    voids: List[int]
    malformed: int
    malformed_docs: List[Tuple[str, str]]


class Ticket(TypedDict):
    """A ticket taken, called, recalled, finished or cancelled, with the queue's counters
    right after."""

    ticket: int
    label: str
    serial: int
    taken: int
    served: int
    waiting: int
    position: Optional[int]
    estimated_wait_seconds: Optional[int]
    desk: Optional[str]
    replayed: bool
    at: Optional[str]
    version: int
    incarnation: str


class CallEntry(TypedDict):
    """A call (or recall) as a board lists it."""

    ticket: int
    label: str
    serial: int
    desk: Optional[str]
    at: Optional[str]
    recall: bool
    wait_seconds: Optional[int]


class DeskEntry(TypedDict):
    """A desk and the ticket it shows."""

    desk: Optional[str]
    ticket: int
    label: str
    serial: int
    at: Optional[str]


class WaitingEntry(TypedDict):
    """A waiting ticket."""

    ticket: int
    label: str
    serial: int


class HourEntry(TypedDict):
    """Activity of one local hour."""

    hour: Optional[str]
    taken: int
    served: int
    waiting: int


class QueueState(TypedDict):
    """A queue's state (``Queue.peek``, ``Queue.alter``, ``list_queues``)."""

    name: str
    min: int
    max: int
    capacity: int
    label_format: Optional[str]
    tz: str
    daily: bool
    day: str
    taken: int
    served: int
    waiting: int
    cancelled: int
    now_serving: Optional[int]
    now_serving_label: Optional[str]
    next_ticket: Optional[int]
    next_ticket_label: Optional[str]
    full: bool
    rounds: int
    recent_calls: List[CallEntry]
    desks: List[DeskEntry]
    waiting_list: List[WaitingEntry]
    estimated_wait_seconds: Optional[int]
    average_wait_seconds: Optional[int]
    p90_wait_seconds: Optional[int]
    taken_today: int
    served_today: int
    hourly: List[HourEntry]
    version: int
    incarnation: str
    created_at: Optional[str]
    updated_at: Optional[str]


class DoctorReport(TypedDict):
    """The server examination (``doctor``): ``fit`` says whether it keeps the guarantees,
    ``reason`` why not; the rest is what was measured (as ``dispenser doctor --json``)."""

    fit: bool
    reason: Optional[str]
    server: Dict[str, Any]
    write_concern: Dict[str, Any]
    operations: List[Dict[str, Any]]
    probe: Dict[str, Any]
    problems: List[Dict[str, str]]
    scratch: Dict[str, Any]
    elapsed_seconds: float
    time_limit_seconds: float
