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

/// A sequence's state, as `peek`, `create`, `advance`, `reset` and `alter` answer it.
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

/// A queue's status, as `GET /v1/queues/{name}` answers it.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct QueueState {
    name: String,
    /// The lowest ticket.
    min: i64,
    /// The highest ticket.
    max: i64,
    /// How many distinct tickets the range holds: the most that may wait.
    capacity: u64,
    /// Tickets taken since the queue was created.
    taken: u64,
    /// Tickets called since the queue was created.
    served: u64,
    /// Tickets waiting (`taken - served`).
    waiting: u64,
    /// The ticket called last, `null` before the first call.
    now_serving: Option<i64>,
    /// The ticket the next take gets, `null` while the queue is full.
    next_ticket: Option<i64>,
    /// Whether a take would be refused now (`waiting == capacity`).
    full: bool,
    /// How many times the tickets went all the way round.
    rounds: u64,
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

/// A ticket taken or called, with the queue's counters right after that write.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct TicketAnswer {
    /// The ticket shown to people.
    ticket: i64,
    /// Which ticket of the queue's history it is, from 1 (the order of takes and calls).
    serial: u64,
    taken: u64,
    served: u64,
    /// Tickets waiting after this write.
    waiting: u64,
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

/// Every error answer: `{"error": {"kind", "message"}}`.
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
}
