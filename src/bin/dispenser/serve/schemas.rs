//! The shapes of the service's answers, as the OpenAPI document describes them (the handlers
//! build their answers as JSON values; these types are only described, never built).

use serde_json::Value;
use utoipa::ToSchema;

/// The numbers drawn: a list for counts up to 1000, contiguous runs above.
#[derive(ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // only described, never built: the handlers answer `serde_json::Value`
pub(super) enum Drawn {
    /// `{"numbers": […]}`, in the order drawn.
    List { numbers: Vec<i64> },
    /// `{"count", "runs": [{first, last, step, count}]}`.
    Runs { count: u64, runs: Vec<Run> },
}

/// A contiguous run of numbers, `step` apart.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct Run {
    first: i64,
    last: i64,
    step: i64,
    count: u64,
}

/// A sequence's state, as `peek`, `create`, `advance-to`, `reset` and `alter` answer it.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct Sequence {
    name: String,
    /// The last number issued.
    value: i64,
    /// The next number, `null` when a non-cyclic sequence is exhausted.
    next: Option<i64>,
    /// Numbers left before the wrap or exhaustion.
    remaining: u64,
    step: i64,
    min: i64,
    max: i64,
    cycle: bool,
    cycles: i64,
    /// Goes up by 1 on every write.
    version: i64,
    created_at: Option<String>,
    updated_at: Option<String>,
    format: Option<String>,
    /// The first number, as created (`null` for documents older than the field).
    start: Option<i64>,
    /// `{index, count}` on the stripes of a striped sequence.
    #[schema(value_type = Option<Object>)]
    stripe: Option<Value>,
    incarnation: Option<String>,
    /// Share used, remaining, rate, forecast, issued per UTC day.
    #[schema(value_type = Object)]
    usage: Value,
}

/// A striped sequence: its name and the state of each stripe.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct Striped {
    name: String,
    stripes: Vec<Sequence>,
}

/// The state of a sequence, or of every stripe of a striped sequence.
#[derive(ToSchema)]
#[serde(untagged)]
#[allow(dead_code, clippy::large_enum_variant)] // described only, never built
pub(super) enum StateAnswer {
    Sequence(Sequence),
    Striped(Striped),
}

/// The state, and whether this request created the sequence.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct Created {
    #[serde(flatten)]
    state: Sequence,
    created: bool,
}

/// `{"sequences": […]}`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct SequenceList {
    sequences: Vec<ListEntry>,
    /// The cursor of the next page (pass it as `after`), `null` after the last page.
    next: Option<String>,
}

/// A listed sequence, or one whose document cannot be read, in its place.
#[derive(ToSchema)]
#[serde(untagged)]
#[allow(dead_code, clippy::large_enum_variant)] // described only, never built
pub(super) enum ListEntry {
    Sequence(Sequence),
    Unreadable { name: String, error: ErrorDetail },
}

/// A call or recall as a board lists it.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct QueueCallEntry {
    ticket: i64,
    label: String,
    serial: u64,
    /// The desk, `null` for a call that named none.
    desk: Option<String>,
    /// When (RFC 3339).
    at: Option<String>,
    /// True for a recall (the ticket announced again).
    recall: bool,
    /// From the take to this call, when known.
    wait_seconds: Option<u64>,
}

/// A desk and the ticket it shows.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct QueueDeskEntry {
    desk: Option<String>,
    ticket: i64,
    label: String,
    serial: u64,
    at: Option<String>,
}

/// A waiting ticket.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct QueueWaitingEntry {
    ticket: i64,
    label: String,
    serial: u64,
}

/// Activity in one local hour.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct QueueHourEntry {
    /// The start of the hour (RFC 3339).
    hour: Option<String>,
    taken: u64,
    served: u64,
    /// Waiting after the last write of that hour.
    waiting: u64,
}

/// A queue's status, as `GET /v1/queues/{name}` answers it.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct QueueState {
    name: String,
    /// The lowest ticket.
    min: i64,
    /// The highest ticket.
    max: i64,
    /// How many distinct tickets the range holds: the most that may be held.
    capacity: u64,
    /// The label format (`A-{n:03}`), `null` for none.
    label_format: Option<String>,
    /// The IANA time zone of the local day and hours.
    tz: String,
    /// Whether each local day starts again at the first ticket.
    daily: bool,
    /// The local date of the last write (`YYYY-MM-DD`).
    day: String,
    /// Tickets taken since the queue was created.
    taken: u64,
    /// Tickets called since the queue was created.
    served: u64,
    /// Tickets waiting.
    waiting: u64,
    /// Tickets cancelled since the queue was created.
    cancelled: u64,
    /// The ticket called last, `null` before the first call.
    now_serving: Option<i64>,
    now_serving_label: Option<String>,
    /// The ticket the next take gets, `null` while the queue is full.
    next_ticket: Option<i64>,
    next_ticket_label: Option<String>,
    /// Whether a take would be refused now.
    full: bool,
    /// How many times the tickets went all the way round.
    rounds: u64,
    /// The last calls and recalls, newest first (at least 10).
    recent_calls: Vec<QueueCallEntry>,
    /// Each desk's current ticket.
    desks: Vec<QueueDeskEntry>,
    /// The first waiting tickets (at most 50), in call order.
    waiting_list: Vec<QueueWaitingEntry>,
    /// The estimated wait of a ticket taken now; `null` while too early to tell.
    estimated_wait_seconds: Option<u64>,
    /// The average wait over the recent calls; `null` when unknown.
    average_wait_seconds: Option<u64>,
    /// The 90th percentile wait over the recent calls; `null` when unknown.
    p90_wait_seconds: Option<u64>,
    /// Tickets taken today (local day in `tz`).
    taken_today: u64,
    /// Tickets called today.
    served_today: u64,
    /// The last 24 local hours that saw activity, oldest first.
    hourly: Vec<QueueHourEntry>,
    /// Goes up by 1 on every write.
    version: i64,
    incarnation: String,
    created_at: Option<String>,
    updated_at: Option<String>,
}

/// The status, and whether this request created the queue.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct QueueCreated {
    #[serde(flatten)]
    state: QueueState,
    created: bool,
}

/// One page of the queues.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct QueueList {
    /// Statuses, or `{name, error}` for a document that cannot be read.
    #[schema(value_type = Vec<Object>)]
    queues: Vec<Value>,
    /// The `after` of the next page, `null` after the last.
    next: Option<String>,
}

/// A ticket taken, called or cancelled, with the queue's counters right after that write.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct TicketAnswer {
    /// The ticket's number.
    ticket: i64,
    /// The ticket as people see it (the queue's format, or the number).
    label: String,
    /// Which ticket of the queue's history it is, from 1 (the order of takes).
    serial: u64,
    taken: u64,
    served: u64,
    /// Tickets waiting after this write.
    waiting: u64,
    /// How many wait before this ticket (0: next); `null` when it does not wait.
    position: Option<u64>,
    /// The estimated wait until it is called; `null` when unknown or not waiting.
    estimated_wait_seconds: Option<u64>,
    /// The desk that called it, `null` otherwise.
    desk: Option<String>,
    /// True when a take's `Idempotency-Key` was seen before (nothing more was taken).
    replayed: bool,
    /// When (RFC 3339).
    at: Option<String>,
    /// The queue's version after the write that did it (for a replayed take: the version its
    /// first take wrote).
    version: i64,
    /// `true` in the answer of a cancel.
    cancelled: Option<bool>,
}

/// A ticket in a family.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct FamilyTicket {
    ticket: i64,
    label: String,
    serial: u64,
    position: Option<u64>,
}

/// The answer of a take: the (first) ticket; for a family also `tickets`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct TakeAnswer {
    #[serde(flatten)]
    first: TicketAnswer,
    /// Every ticket of a family of more than one, in call order.
    tickets: Option<Vec<FamilyTicket>>,
}

/// Where one ticket stands (`GET /v1/queues/{name}/tickets/{serial}`, and each event of its
/// page's stream).
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct FollowedTicket {
    /// The ticket's serial (as its take answered it).
    serial: u64,
    /// Its number.
    ticket: i64,
    /// As people see it.
    label: String,
    /// `waiting`, `called` (a desk shows it), `passed` (called, and its desk moved on),
    /// `cancelled`, `done` (no longer waiting; called or cancelled long ago), `not_taken`.
    #[schema(pattern = "^(waiting|called|passed|cancelled|done|not_taken)$")]
    state: String,
    /// How many are called before it, while it waits.
    position: Option<u64>,
    /// The estimated wait until it is called; `null` when unknown or not waiting.
    estimated_wait_seconds: Option<u64>,
    /// The desk that calls (or called) it, when it named one and the queue still lists it.
    desk: Option<String>,
    /// When it was called (RFC 3339), when the queue still lists it.
    called_at: Option<String>,
    /// The queue's incarnation (a serial names a ticket of one incarnation only).
    incarnation: String,
    /// The queue's version the view was read at.
    version: i64,
    /// The queue's name.
    queue: String,
    /// How many wait in the queue.
    queue_waiting: u64,
    /// The ticket the queue called last, as people see it; `null` before the first call.
    now_serving_label: Option<String>,
}

/// A queue's ticket link (`GET /v1/queues/{name}/ticket-link`).
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct TicketLink {
    /// The queue's name.
    queue: String,
    /// The name of the ticket link's token (`null`: the queue has no ticket link).
    token_name: Option<String>,
    /// The ticket page's address, with the link's token in its fragment (`#token=…`).
    url: Option<String>,
    /// `url` as a QR code: an SVG document.
    qr_svg: Option<String>,
}

/// The answer of a recall.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct RecallAnswer {
    #[serde(flatten)]
    ticket: TicketAnswer,
}

/// A sequence with the numbers the service's block clients hold of it.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct HeldSequence {
    #[serde(flatten)]
    state: Sequence,
    /// Numbers reserved in the service's blocks and not handed out yet.
    held: u64,
}

/// A sequence in the overview, or one whose document cannot be read, in its place.
#[derive(ToSchema)]
#[serde(untagged)]
#[allow(dead_code, clippy::large_enum_variant)] // described only, never built
pub(super) enum OverviewSequence {
    Sequence(HeldSequence),
    Unreadable { name: String, error: ErrorDetail },
}

/// A queue in the overview, or one whose document cannot be read, in its place.
#[derive(ToSchema)]
#[serde(untagged)]
#[allow(dead_code, clippy::large_enum_variant)] // described only, never built
pub(super) enum OverviewQueue {
    Queue(QueueState),
    Unreadable { name: String, error: ErrorDetail },
}

/// What the operators' page shows.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct Overview {
    /// One page of the sequences (`limit`, default 50), by name.
    sequences: Vec<OverviewSequence>,
    /// The cursor of the next page of sequences (pass it as `after`), `null` after the last.
    next: Option<String>,
    /// Gap-free sequences, as `GET /v1/gapless/{name}` answers them (at most 50), or
    /// `{name, error}` for one that cannot be read.
    #[schema(value_type = Vec<Object>)]
    gapless: Vec<Value>,
    /// Whether there are more gap-free sequences than shown.
    gapless_truncated: bool,
    /// Queues (at most 100, by name).
    queues: Vec<OverviewQueue>,
    /// Whether there are more queues than shown.
    queues_truncated: bool,
}

/// The numbers the service handed out from one sequence, hour by hour.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct Hourly {
    name: String,
    /// The last 24 hours, oldest first.
    hours: Vec<HourCount>,
}

/// One hour of [`Hourly`].
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct HourCount {
    /// The start of the hour (RFC 3339, UTC).
    hour: String,
    /// Numbers this service handed out in it.
    issued: u64,
}

/// `{"status": "ok"}`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct Health {
    status: String,
}

/// Every error answer: `{"error": {"kind", "message", "outcome"}}`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct ErrorBody {
    error: ErrorDetail,
}

/// What went wrong: a stable `kind` (`invalid_input`, `no_such_sequence`, `exhausted`, …)
/// and a readable message.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct ErrorDetail {
    kind: String,
    message: String,
    /// What the request left written: `nothing_written`, or `unknown` when a write it sent
    /// lost its answer (look before making it again where that matters). Every error answer
    /// has it; a document shown in a listing does not.
    outcome: Option<String>,
}
