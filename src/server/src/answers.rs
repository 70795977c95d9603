//! The service's answers, as typed values: the handlers build and return them, and the OpenAPI
//! document (`openapi.rs`) derives their schemas from these same types, so an answer and its
//! schema cannot part.
//!
//! What the library renders itself (a sequence's, a queue's or a gap-free sequence's state, a
//! ticket, a followed ticket, a history entry: the `to_json` the CLI's `--json` and the
//! bindings print) is read into its type here with [`of_library`], which checks that the
//! type writes it back unchanged: every field the library writes is one the type declares,
//! with the declared type; the fields are declared in the library's order, so the service
//! answers byte for byte what the CLI prints. A library
//! change that the type does not follow fails every such answer (500 `internal`, naming the
//! type) and the tests that make it, instead of answering what the document does not say.

use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::classify::classify;
use super::errors::{ApiError, ErrorDetail};

/// The library's JSON of a value, read into the answer type `T` (see the module's doc): it
/// must read back as exactly that JSON — no field the type does not declare, none it lacks,
/// no value it changes.
pub(super) fn of_library<T: Serialize + DeserializeOwned>(json: Value) -> Result<T, ApiError> {
    let read = serde_json::from_value::<T>(json.clone())
        .map_err(|e| e.to_string())
        .and_then(|t| match serde_json::to_value(&t) {
            Ok(back) if back == json => Ok(t),
            Ok(back) => Err(format!("it reads back as {back}, not as {json}")),
            Err(e) => Err(e.to_string()),
        });
    read.map_err(|e| {
        tracing::error!(
            "the library's JSON does not fit the answer {}: {e}",
            std::any::type_name::<T>()
        );
        let mut error = ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!(
                "the service cannot answer this {}: the library's value does not fit the documented answer; report it",
                short_name::<T>()
            ),
        );
        // An answer is read after the operation: whatever it wrote stays written.
        error.written = dispenser::error::Written::Unknown.as_str();
        error
    })
}

/// `answers::Sequence` → `Sequence`.
fn short_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}

// ---------------------------------------------------------------------------------------
// Errors.

/// A listed document that cannot be read, in its place: `{name, error: {code, kind,
/// message}}`.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub(super) struct Unreadable {
    pub(super) name: String,
    pub(super) error: ErrorDetail,
}

impl Unreadable {
    /// `name`'s entry for the error `e` (its message scrubbed of secrets by `scrub`).
    pub(super) fn new(name: &str, e: &dispenser::Error, scrub: impl Fn(&str) -> String) -> Self {
        let (_, code) = classify(e);
        Unreadable {
            name: name.to_owned(),
            error: ErrorDetail {
                code: code.to_owned(),
                kind: e.kind().as_str().to_owned(),
                message: scrub(&e.to_string()),
                written: None,
            },
        }
    }
}

/// `{"status": "ok"}`.
#[derive(Serialize, ToSchema)]
pub(super) struct Health {
    pub(super) status: &'static str,
}

// ---------------------------------------------------------------------------------------
// Draws.

/// The numbers drawn: a list for counts up to 1000, contiguous runs above.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub(super) enum Drawn {
    /// `{"numbers": […]}`, in the order drawn (written by hand on the hot path: `draw.rs`
    /// checks that it writes what this serializes to).
    #[cfg_attr(not(test), allow(dead_code))]
    List { numbers: Vec<i64> },
    /// `{"count", "runs": [{first, last, step, count}]}`.
    Runs { count: u64, runs: Vec<Run> },
}

/// A contiguous run of numbers, `step` apart.
#[derive(Serialize, ToSchema, Clone, Debug, PartialEq, Eq)]
pub(super) struct Run {
    pub(super) first: i64,
    pub(super) last: i64,
    pub(super) step: i64,
    pub(super) count: u64,
}

// ---------------------------------------------------------------------------------------
// Sequences.

/// A sequence's state, as `peek`, `create`, `advance-to`, `reset` and `alter` answer it
/// (`SequenceState::to_json`).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct Sequence {
    pub(super) name: String,
    /// The last number issued.
    pub(super) value: i64,
    /// The next number, `null` when a non-cyclic sequence is exhausted.
    pub(super) next: Option<i64>,
    /// Numbers left before the wrap or exhaustion.
    pub(super) remaining: u64,
    pub(super) step: i64,
    pub(super) min: i64,
    pub(super) max: i64,
    pub(super) cycle: bool,
    pub(super) cycles: i64,
    /// Goes up by 1 on every write.
    pub(super) version: i64,
    pub(super) created_at: Option<String>,
    pub(super) updated_at: Option<String>,
    pub(super) format: Option<String>,
    /// The first number, as created (`null` for documents older than the field).
    pub(super) start: Option<i64>,
    /// On the stripes of a striped sequence: which stripe of how many.
    pub(super) stripe: Option<StripeOf>,
    pub(super) incarnation: Option<String>,
    /// Share used, remaining, rate, forecast, issued per UTC day.
    pub(super) usage: Usage,
}

/// A stripe's place: `{index, count}`.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct StripeOf {
    pub(super) index: u32,
    pub(super) count: u32,
}

/// How much of a sequence is used, and how fast.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct Usage {
    /// The share of the range used (0 to 1).
    pub(super) fraction_used: Option<f64>,
    /// Numbers left before the wrap or exhaustion.
    pub(super) remaining: u64,
    /// Numbers issued per second lately; `null` when unknown.
    pub(super) rate_per_sec: Option<f64>,
    /// Seconds until exhaustion at that rate; `null` when unknown or cyclic.
    pub(super) exhausted_in_secs: Option<u64>,
    /// Wraps per day at that rate (cyclic sequences); `null` when unknown.
    pub(super) wraps_per_day: Option<f64>,
    /// How many seconds of history the rate is from; `null` when none.
    pub(super) history_secs: Option<u64>,
    /// Numbers issued per UTC day (`YYYY-MM-DD`), oldest first.
    #[schema(value_type = HashMap<String, i64>)]
    pub(super) issued_by_day: serde_json::Map<String, Value>,
}

/// A striped sequence: its name and the state of each stripe.
#[derive(Serialize, ToSchema)]
pub(super) struct Striped {
    pub(super) name: String,
    pub(super) stripes: Vec<Sequence>,
}

/// The state of a sequence, or of every stripe of a striped sequence.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)] // one answer, built once per request
pub(super) enum StateAnswer {
    Sequence(Sequence),
    Striped(Striped),
}

impl StateAnswer {
    /// A plain sequence's state.
    pub(super) fn plain(s: &dispenser::sequence::SequenceState) -> Result<Self, ApiError> {
        Ok(StateAnswer::Sequence(of_library(s.to_json())?))
    }

    /// A striped sequence's: `{name, stripes: [state, …]}`.
    pub(super) fn striped(
        name: &str,
        states: &[dispenser::sequence::SequenceState],
    ) -> Result<Self, ApiError> {
        Ok(StateAnswer::Striped(Striped {
            name: name.to_owned(),
            stripes: states
                .iter()
                .map(|s| of_library(s.to_json()))
                .collect::<Result<_, _>>()?,
        }))
    }
}

/// A setting an `if_not_exists` found changed since by an alter: kept as stored, the asked
/// value not applied (the library's `Altered`).
#[derive(Serialize, ToSchema)]
pub(super) struct AlteredSetting {
    /// The setting (`max`, `step`, `format`, `max lease`, …).
    pub(super) setting: String,
    /// Its stored value, as shown (`200`, `"A-{n:03}"`, `none`).
    pub(super) stored: String,
    /// The value asked for, as shown.
    pub(super) asked: String,
}

/// The settings `altered` of an answer.
pub(super) fn altered_settings(altered: &[dispenser::sequence::Altered]) -> Vec<AlteredSetting> {
    altered
        .iter()
        .map(|a| AlteredSetting {
            setting: a.setting.clone(),
            stored: a.stored.clone(),
            asked: a.asked.clone(),
        })
        .collect()
}

/// The state, and whether this request created the sequence.
#[derive(Serialize, ToSchema)]
pub(super) struct Created {
    #[serde(flatten)]
    pub(super) state: Sequence,
    pub(super) created: bool,
    /// With `if_not_exists` on a sequence that exists: each setting it asked that an alter
    /// changed since (bounds, step, cycle, format), kept as stored; empty otherwise.
    pub(super) altered: Vec<AlteredSetting>,
}

impl Created {
    /// The answer of a create that answers `status` (201: made now).
    pub(super) fn of(
        s: &dispenser::sequence::SequenceState,
        status: StatusCode,
        altered: &[dispenser::sequence::Altered],
    ) -> Result<Self, ApiError> {
        Ok(Created {
            state: of_library(s.to_json())?,
            created: status == StatusCode::CREATED,
            altered: altered_settings(altered),
        })
    }
}

/// A listed sequence, or one whose document cannot be read, in its place.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)]
pub(super) enum ListEntry {
    Sequence(Sequence),
    Unreadable(Unreadable),
}

/// `{"sequences": […], "next"}`.
#[derive(Serialize, ToSchema)]
pub(super) struct SequenceList {
    pub(super) sequences: Vec<ListEntry>,
    /// The cursor of the next page (pass it as `after`), `null` after the last page.
    pub(super) next: Option<String>,
}

/// The numbers the service handed out from one sequence, hour by hour.
#[derive(Serialize, ToSchema)]
pub(super) struct Hourly {
    pub(super) name: String,
    /// The last 24 hours, oldest first.
    pub(super) hours: Vec<HourCount>,
}

/// One hour of [`Hourly`].
#[derive(Serialize, ToSchema)]
pub(super) struct HourCount {
    /// The start of the hour (RFC 3339, UTC).
    pub(super) hour: Option<String>,
    /// Numbers this service handed out in it.
    pub(super) issued: u64,
}

// ---------------------------------------------------------------------------------------
// Queues.

/// A call or recall as a board lists it.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct QueueCallEntry {
    pub(super) ticket: i64,
    pub(super) label: String,
    pub(super) serial: u64,
    /// The desk, `null` for a call that named none.
    pub(super) desk: Option<String>,
    /// When (RFC 3339).
    pub(super) at: Option<String>,
    /// True for a recall (the ticket announced again).
    pub(super) recall: bool,
    /// From the take to this call, when known.
    pub(super) wait_seconds: Option<u64>,
}

/// A desk and the ticket it shows.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct QueueDeskEntry {
    pub(super) desk: Option<String>,
    pub(super) ticket: i64,
    pub(super) label: String,
    pub(super) serial: u64,
    pub(super) at: Option<String>,
}

/// A waiting ticket.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct QueueWaitingEntry {
    pub(super) ticket: i64,
    pub(super) label: String,
    pub(super) serial: u64,
}

/// Activity in one local hour.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct QueueHourEntry {
    /// The start of the hour (RFC 3339).
    pub(super) hour: Option<String>,
    pub(super) taken: u64,
    pub(super) served: u64,
    /// Waiting after the last write of that hour.
    pub(super) waiting: u64,
}

/// A queue's state, as `GET /v1/queues/{name}` answers it (`QueueState::to_json`).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct QueueState {
    pub(super) name: String,
    /// The lowest ticket.
    pub(super) min: i64,
    /// The highest ticket.
    pub(super) max: i64,
    /// How many distinct tickets the range holds: the most that may be held.
    pub(super) capacity: u64,
    /// The label format (`A-{n:03}`), `null` for none.
    pub(super) label_format: Option<String>,
    /// The IANA time zone of the local day and hours.
    pub(super) tz: String,
    /// Whether each local day starts again at the first ticket.
    pub(super) daily: bool,
    /// The local date of the last write (`YYYY-MM-DD`).
    pub(super) day: String,
    /// Tickets taken since the queue was created.
    pub(super) taken: u64,
    /// Tickets called since the queue was created.
    pub(super) served: u64,
    /// Tickets waiting.
    pub(super) waiting: u64,
    /// Tickets cancelled since the queue was created.
    pub(super) cancelled: u64,
    /// The ticket called last, `null` before the first call.
    pub(super) now_serving: Option<i64>,
    pub(super) now_serving_label: Option<String>,
    /// The ticket the next take gets, `null` while the queue is full.
    pub(super) next_ticket: Option<i64>,
    pub(super) next_ticket_label: Option<String>,
    /// Whether a take would be refused now.
    pub(super) full: bool,
    /// How many times the tickets went all the way round.
    pub(super) rounds: u64,
    /// The last calls and recalls, newest first (at least 10).
    pub(super) recent_calls: Vec<QueueCallEntry>,
    /// Each desk's current ticket.
    pub(super) desks: Vec<QueueDeskEntry>,
    /// The first waiting tickets (at most 50), in call order.
    pub(super) waiting_list: Vec<QueueWaitingEntry>,
    /// The estimated wait of a ticket taken now; `null` while too early to tell.
    pub(super) estimated_wait_seconds: Option<u64>,
    /// The average wait over the recent calls; `null` when unknown.
    pub(super) average_wait_seconds: Option<u64>,
    /// The 90th percentile wait over the recent calls; `null` when unknown.
    pub(super) p90_wait_seconds: Option<u64>,
    /// Tickets taken today (local day in `tz`).
    pub(super) taken_today: u64,
    /// Tickets called today.
    pub(super) served_today: u64,
    /// The last 24 local hours that saw activity, oldest first.
    pub(super) hourly: Vec<QueueHourEntry>,
    /// Goes up by 1 on every write.
    pub(super) version: i64,
    pub(super) incarnation: String,
    pub(super) created_at: Option<String>,
    pub(super) updated_at: Option<String>,
}

impl QueueState {
    pub(super) fn of(s: &dispenser::queue::QueueState) -> Result<Self, ApiError> {
        of_library(s.to_json())
    }
}

/// The state, and whether this request created the queue.
#[derive(Serialize, ToSchema)]
pub(super) struct QueueCreated {
    #[serde(flatten)]
    pub(super) state: QueueState,
    pub(super) created: bool,
    /// With `if_not_exists` on a queue that exists: its highest ticket when an alter changed
    /// it since, kept as stored; empty otherwise.
    pub(super) altered: Vec<AlteredSetting>,
}

impl QueueCreated {
    /// The answer of a create that answers `status` (201: made now).
    pub(super) fn of(
        s: &dispenser::queue::QueueState,
        status: StatusCode,
        altered: &[dispenser::sequence::Altered],
    ) -> Result<Self, ApiError> {
        Ok(QueueCreated {
            state: QueueState::of(s)?,
            created: status == StatusCode::CREATED,
            altered: altered_settings(altered),
        })
    }
}

/// A listed queue, or one whose document cannot be read, in its place.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)]
pub(super) enum QueueEntry {
    Queue(QueueState),
    Unreadable(Unreadable),
}

/// One page of the queues.
#[derive(Serialize, ToSchema)]
pub(super) struct QueueList {
    pub(super) queues: Vec<QueueEntry>,
    /// The `after` of the next page, `null` after the last.
    pub(super) next: Option<String>,
}

/// A ticket taken, called, recalled or cancelled, with the queue's counters right after that
/// write (`Ticket::to_json`; a cancel adds `cancelled: true`).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct TicketAnswer {
    /// The ticket's number.
    pub(super) ticket: i64,
    /// The ticket as people see it (the queue's format, or the number).
    pub(super) label: String,
    /// Which ticket of the queue's history it is, from 1 (the order of takes).
    pub(super) serial: u64,
    pub(super) taken: u64,
    pub(super) served: u64,
    /// Tickets waiting after this write.
    pub(super) waiting: u64,
    /// How many wait before this ticket (0: next); `null` when it does not wait.
    pub(super) position: Option<u64>,
    /// The estimated wait until it is called; `null` when unknown or not waiting.
    pub(super) estimated_wait_seconds: Option<u64>,
    /// The desk that called it, `null` otherwise.
    pub(super) desk: Option<String>,
    /// True when a take's `Idempotency-Key` was seen before (nothing more was taken).
    pub(super) replayed: bool,
    /// When (RFC 3339).
    pub(super) at: Option<String>,
    /// The queue's version after the write that did it (for a replayed take: the version its
    /// first take wrote).
    pub(super) version: i64,
    /// The queue's incarnation (24 hexadecimal digits): with `serial`, the ticket's identity,
    /// which a cancel or a call of a given ticket names (a queue deleted and created again
    /// numbers its serials from 1 again).
    #[schema(pattern = "^[0-9a-f]{24}$")]
    pub(super) incarnation: String,
    /// `true` in the answer of a cancel (and a give-up); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) cancelled: Option<bool>,
}

impl TicketAnswer {
    pub(super) fn of(t: &dispenser::queue::Ticket) -> Result<Self, ApiError> {
        of_library(t.to_json())
    }

    /// A cancelled ticket's answer: `cancelled: true`.
    pub(super) fn cancelled(t: &dispenser::queue::Ticket) -> Result<Self, ApiError> {
        Ok(TicketAnswer {
            cancelled: Some(true),
            ..TicketAnswer::of(t)?
        })
    }
}

/// A ticket in a family.
#[derive(Serialize, ToSchema)]
pub(super) struct FamilyTicket {
    pub(super) ticket: i64,
    pub(super) label: String,
    pub(super) serial: u64,
    pub(super) position: Option<u64>,
}

/// The answer of a take: the (first) ticket; for a family also `tickets`.
#[derive(Serialize, ToSchema)]
pub(super) struct TakeAnswer {
    #[serde(flatten)]
    pub(super) first: TicketAnswer,
    /// Every ticket of a family of more than one, in call order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) tickets: Option<Vec<FamilyTicket>>,
}

impl TakeAnswer {
    /// The answer of a take of `tickets` (at least one).
    pub(super) fn of(tickets: &[dispenser::queue::Ticket]) -> Result<Self, ApiError> {
        let first = tickets.first().ok_or_else(|| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "a take answered no ticket; report it",
            )
        })?;
        Ok(TakeAnswer {
            first: TicketAnswer::of(first)?,
            tickets: (tickets.len() > 1).then(|| {
                tickets
                    .iter()
                    .map(|t| FamilyTicket {
                        ticket: t.number,
                        label: t.label.clone(),
                        serial: t.serial,
                        position: t.position,
                    })
                    .collect()
            }),
        })
    }
}

/// Where one ticket stands (`GET /v1/queues/{name}/tickets/{serial}`, and each event of its
/// page's stream): `TicketView::to_json`, with the queue's name, how many wait and what it
/// serves now.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct FollowedTicket {
    /// The ticket's serial (as its take answered it).
    pub(super) serial: u64,
    /// Its number.
    pub(super) ticket: i64,
    /// As people see it.
    pub(super) label: String,
    /// `waiting`, `called` (a desk shows it), `passed` (called, and its desk moved on),
    /// `cancelled`, `done` (no longer waiting; called or cancelled long ago), `not_taken`.
    #[schema(pattern = "^(waiting|called|passed|cancelled|done|not_taken)$")]
    pub(super) state: String,
    /// How many are called before it, while it waits.
    pub(super) position: Option<u64>,
    /// The estimated wait until it is called; `null` when unknown or not waiting.
    pub(super) estimated_wait_seconds: Option<u64>,
    /// The desk that calls (or called) it, when it named one and the queue still lists it.
    pub(super) desk: Option<String>,
    /// When it was called (RFC 3339), when the queue still lists it.
    pub(super) called_at: Option<String>,
    /// The queue's incarnation (a serial names a ticket of one incarnation only).
    pub(super) incarnation: String,
    /// The queue's version the view was read at.
    pub(super) version: i64,
    /// The queue's name.
    #[serde(default)]
    pub(super) queue: String,
    /// How many wait in the queue.
    #[serde(default)]
    pub(super) queue_waiting: u64,
    /// The ticket the queue called last, as people see it; `null` before the first call.
    #[serde(default)]
    pub(super) now_serving_label: Option<String>,
}

/// A queue's ticket link (`GET /v1/queues/{name}/ticket-link`).
#[derive(Serialize, ToSchema)]
pub(super) struct TicketLink {
    /// The queue's name.
    pub(super) queue: String,
    /// The name of the ticket link's token (`null`: the queue has no ticket link).
    pub(super) token_name: Option<String>,
    /// The ticket page's address, with the link's token in its fragment (`#token=…`).
    pub(super) url: Option<String>,
    /// `url` as a QR code: an SVG document.
    pub(super) qr_svg: Option<String>,
}

// ---------------------------------------------------------------------------------------
// Gap-free sequences.

/// The lease on a gap-free sequence's next number.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct Lease {
    /// The leased number.
    pub(super) number: i64,
    /// The holder's id.
    pub(super) holder: String,
    /// When the lease runs out, by the server's clock (RFC 3339).
    pub(super) expires: String,
    /// Whether other callers wait for it.
    pub(super) waiters: bool,
}

/// A voided number and why.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct Voided {
    pub(super) number: i64,
    pub(super) reason: String,
    /// When (RFC 3339).
    pub(super) at: String,
}

/// A gap-free sequence's state, as `GET /v1/gapless/{name}` answers it
/// (`GaplessState::to_json`; the lease by the server's clock).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct Gapless {
    pub(super) name: String,
    /// The business collection whose documents carry the numbers.
    pub(super) collection: String,
    /// The number field.
    pub(super) field: String,
    /// The field of a void document that holds why it was voided.
    pub(super) void_field: String,
    /// The next number.
    pub(super) next: i64,
    /// The longest lease, in seconds (a fraction: `300.0`).
    pub(super) max_lease_seconds: f64,
    /// Whether the unique index on the number field is there.
    pub(super) unique_index: bool,
    /// The holder of `next`, if any.
    pub(super) lease: Option<Lease>,
    /// Whether the lease had run out when the state was read.
    pub(super) lease_expired: bool,
    /// The server's clock when the state was read (RFC 3339).
    pub(super) server_time: String,
    /// Voided numbers, in number order (the first 1000).
    pub(super) voided: Vec<Voided>,
}

impl Gapless {
    pub(super) fn of(s: &dispenser::gapless::GaplessState) -> Result<Self, ApiError> {
        of_library(s.to_json())
    }
}

/// The state, and whether this request created the gap-free sequence.
#[derive(Serialize, ToSchema)]
pub(super) struct GaplessCreated {
    #[serde(flatten)]
    pub(super) state: Gapless,
    pub(super) created: bool,
    /// With `if_not_exists` on a gap-free sequence that exists: its longest lease when an
    /// alter changed it since, kept as stored; empty otherwise.
    pub(super) altered: Vec<AlteredSetting>,
}

impl GaplessCreated {
    /// The answer of a create that answers `status` (201: made now).
    pub(super) fn of(
        s: &dispenser::gapless::GaplessState,
        status: StatusCode,
        altered: &[dispenser::sequence::Altered],
    ) -> Result<Self, ApiError> {
        Ok(GaplessCreated {
            state: Gapless::of(s)?,
            created: status == StatusCode::CREATED,
            altered: altered_settings(altered),
        })
    }
}

/// A listed gap-free sequence, or one that cannot be read, in its place.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)]
pub(super) enum GaplessEntry {
    Gapless(Gapless),
    Unreadable(Unreadable),
}

/// One page of the gap-free sequences.
#[derive(Serialize, ToSchema)]
pub(super) struct GaplessList {
    pub(super) gapless: Vec<GaplessEntry>,
    /// The `after` of the next page, `null` after the last.
    pub(super) next: Option<String>,
}

/// The answer of a void: the state after it, or — to a token that may not `peek` the
/// sequence — only the number voided.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)]
pub(super) enum VoidAnswer {
    State(Gapless),
    Voided { name: String, voided: i64 },
}

/// The answer of a release: the library's shape (`Released::to_json`: `{outcome: "voided",
/// number}` or `{outcome: "used", first, last}`) with the sequence's `name`, and, to a token
/// that may also `peek` the sequence, `status`; to one that may not, a `used` answer leaves
/// out `last` (the number after it is the next one).
#[derive(Serialize, ToSchema)]
pub(super) struct ReleaseAnswer {
    pub(super) name: String,
    /// `voided` (the holder had not written it: voided now) or `used` (it had).
    #[schema(pattern = "^(voided|used)$")]
    pub(super) outcome: &'static str,
    /// The number voided (for `voided`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) number: Option<i64>,
    /// The held number, which the holder had written (for `used`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) first: Option<i64>,
    /// The last number the holder wrote (for `used`, to a token that may `peek`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) last: Option<i64>,
    /// The state after the release (to a token that may `peek`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) status: Option<Gapless>,
}

impl ReleaseAnswer {
    /// The answer of `released` on the gap-free sequence `name`; `status` (and `last`) only
    /// for a token that may `peek` it.
    pub(super) fn of(
        name: String,
        released: dispenser::gapless::Released,
        status: Option<Gapless>,
    ) -> Self {
        use dispenser::gapless::Released;
        let peek = status.is_some();
        let (outcome, number, first, last) = match released {
            Released::Voided(n) => ("voided", Some(n), None, None),
            Released::Used { first, last } => ("used", None, Some(first), Some(last)),
            // `Released` is non-exhaustive; a new outcome is named once the service knows it.
            _ => ("used", None, None, None),
        };
        ReleaseAnswer {
            name,
            outcome,
            number,
            first,
            last: last.filter(|_| peek),
            status,
        }
    }
}

/// The answer of a change of the longest lease.
#[derive(Serialize, ToSchema)]
pub(super) struct MaxLeaseAnswer {
    pub(super) name: String,
    /// The longest lease now, in seconds (a fraction: `60.0`).
    pub(super) max_lease_seconds: f64,
}

// ---------------------------------------------------------------------------------------
// The overview.

/// A sequence with the numbers the service's block clients hold of it.
#[derive(Serialize, ToSchema)]
pub(super) struct HeldSequence {
    #[serde(flatten)]
    pub(super) state: Sequence,
    /// Numbers reserved in the service's blocks and not handed out yet.
    pub(super) held: u64,
}

/// A sequence in the overview, or one whose document cannot be read, in its place.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)]
pub(super) enum OverviewSequence {
    Sequence(HeldSequence),
    Unreadable(Unreadable),
}

/// What the operators' page shows.
#[derive(Serialize, ToSchema)]
pub(super) struct Overview {
    /// One page of the sequences (`limit`, default 50), by name.
    pub(super) sequences: Vec<OverviewSequence>,
    /// The cursor of the next page of sequences (pass it as `after`), `null` after the last.
    pub(super) next: Option<String>,
    /// Gap-free sequences, as `GET /v1/gapless/{name}` answers them (at most 50).
    pub(super) gapless: Vec<GaplessEntry>,
    /// Whether there are more gap-free sequences than shown.
    pub(super) gapless_truncated: bool,
    /// Queues (at most 100, by name).
    pub(super) queues: Vec<QueueEntry>,
    /// Whether there are more queues than shown.
    pub(super) queues_truncated: bool,
}

// ---------------------------------------------------------------------------------------
// History.

/// One entry of a history (`HistoryEntry::to_json`).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub(super) struct HistoryItem {
    /// The record's id.
    pub(super) id: String,
    /// `sequence`, `stripe`, `scope`, `gapless` or `queue`.
    pub(super) kind: String,
    /// The exact name of what changed: the sequence, the stripe (`ids~3`), the scope
    /// (`t@k`), the gap-free sequence or the queue.
    pub(super) name: String,
    /// A stripe's index (`null` for another kind).
    pub(super) stripe: Option<u32>,
    /// A scope's template (`null` for another kind).
    pub(super) template: Option<String>,
    /// A scope's key (`null` for another kind).
    pub(super) key: Option<String>,
    /// `create`, `alter`, `advance-to`, `reset`, `delete`, `delete-scopes`; for a gap-free
    /// sequence `create`, `alter`, `void`, `release`, `delete`; for a queue `create`,
    /// `alter`, `cancel`, `delete` (older records: `set-format`, `max-lease`).
    pub(super) op: String,
    /// The parameters, as given.
    #[schema(value_type = Object)]
    pub(super) params: Value,
    /// Who acted: the token's name through the service, `--caller` through the command line.
    pub(super) who: Option<String>,
    /// When it started, by the server's clock (RFC 3339).
    pub(super) at: String,
    /// `server`, or `client` when the server did not say its time.
    pub(super) clock: String,
    /// The state read just before (`null` before a create).
    #[schema(value_type = Option<Object>)]
    pub(super) before: Option<Value>,
    /// The state read just after (`null` after a delete or a refusal).
    #[schema(value_type = Option<Object>)]
    pub(super) after: Option<Value>,
    /// `done`, `refused` (nothing changed), `failed` (the change may or may not have been
    /// made) or `pending` (no outcome recorded: running, or its process stopped).
    pub(super) outcome: String,
    /// Why, for `refused` and `failed`.
    pub(super) error: Option<String>,
    /// When it ended, by the server's clock (`null` while pending).
    pub(super) ended_at: Option<String>,
    /// The `after` of the page that continues after this entry.
    pub(super) cursor: String,
}

/// A page of a history.
#[derive(Serialize, ToSchema)]
pub(super) struct HistoryPage {
    pub(super) name: String,
    /// Oldest first.
    pub(super) history: Vec<HistoryItem>,
    /// The cursor of the next page (`after`); `null` after the last.
    pub(super) next: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::errors::ErrorBody;

    fn gapless() -> Value {
        json!({
            "name": "inv", "collection": "invoices", "field": "number", "void_field": "voided",
            "next": 7, "max_lease_seconds": 300.0, "unique_index": true,
            "lease": { "number": 7, "holder": "6b0ab75e8d6306db9688de0f", "expires": "2026-11-28T11:13:34Z", "waiters": false },
            "lease_expired": false, "server_time": "2026-11-28T11:13:33Z",
            "voided": [{ "number": 3, "reason": "torn", "at": "2026-11-28T10:00:00Z" }],
        })
    }

    /// An answer read from the library's JSON is that JSON, byte for byte; a field the
    /// answer's type does not declare, one it lacks or a value of another type is refused
    /// (500, naming the answer), never answered past the document.
    #[test]
    fn the_library_json_is_answered_exactly_or_not_at_all() {
        let read: Gapless = of_library(gapless()).unwrap();
        assert_eq!(
            serde_json::to_string(&read).unwrap(),
            serde_json::to_string(&gapless()).unwrap()
        );
        let mut more = gapless();
        more["holders"] = json!(2);
        let mut less = gapless();
        less.as_object_mut().unwrap().remove("voided");
        let mut other = gapless();
        other["next"] = json!("7");
        let mut nested = gapless();
        nested["lease"]["since"] = json!("2026-11-28T11:00:00Z");
        for wrong in [more, less, other, nested] {
            let e = of_library::<Gapless>(wrong.clone()).unwrap_err();
            assert_eq!(
                (e.status, e.code, e.kind, e.written),
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "internal",
                    "unknown"
                ),
                "{wrong}"
            );
            assert!(e.message.contains("this Gapless"), "{}", e.message);
        }
    }

    /// A release's answer is the library's shape (`Released::to_json`) with the name, and
    /// the state only to a token that may `peek` (without it, no `last`).
    #[test]
    fn a_release_answers_the_librarys_shape() {
        use dispenser::gapless::Released;
        let status = || Some(of_library::<Gapless>(gapless()).unwrap());
        for released in [Released::Voided(7), Released::Used { first: 7, last: 9 }] {
            let mut answer =
                serde_json::to_value(ReleaseAnswer::of("inv".into(), released, status())).unwrap();
            let map = answer.as_object_mut().unwrap();
            assert_eq!(map.remove("name"), Some(json!("inv")));
            assert_eq!(map.remove("status"), Some(gapless()));
            assert_eq!(answer, released.to_json());
        }
        let blind = ReleaseAnswer::of("inv".into(), Released::Used { first: 7, last: 9 }, None);
        assert_eq!(
            serde_json::to_value(blind).unwrap(),
            json!({ "name": "inv", "outcome": "used", "first": 7 })
        );
    }

    /// The error body is the one every error answer has: `{"error": {code, kind, message,
    /// written}}`, and a listed document that cannot be read has no `written`.
    #[test]
    fn error_bodies_keep_their_shape() {
        let body = ErrorBody {
            error: ErrorDetail {
                code: "not_found".into(),
                kind: "not_found".into(),
                message: "no such endpoint".into(),
                written: Some("nothing_written".into()),
            },
        };
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"error":{"code":"not_found","kind":"not_found","message":"no such endpoint","written":"nothing_written"}}"#
        );
        let unreadable = Unreadable {
            name: "x".into(),
            error: ErrorDetail {
                written: None,
                ..body.error
            },
        };
        assert_eq!(
            serde_json::to_value(&unreadable).unwrap(),
            json!({ "name": "x", "error": { "code": "not_found", "kind": "not_found", "message": "no such endpoint" } })
        );
    }
}
