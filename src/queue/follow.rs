//! Where one ticket stands, read from a [`QueueState`](super::QueueState): what a person following their own
//! ticket needs (its place in line and estimated wait, the desk that calls it), for any ticket
//! of the queue, not only the first [`WAITING_LISTED`](super::WAITING_LISTED) waiting.

use std::sync::Arc;
use std::time::Duration;

use bson::DateTime;
use bson::oid::ObjectId;
use serde_json::{Value, json};

use super::state::{Kind, State};

/// The state a [`QueueState`](super::QueueState) was read from, kept for [`QueueState::ticket`](super::QueueState::ticket): without the
/// request ids, the takes' times and the hours, which no ticket's place depends on.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Line {
    state: Arc<State>,
    /// When the status was read (ms since the epoch): the estimates count from it.
    now: i64,
}

impl std::fmt::Debug for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Line")
            .field("taken", &self.state.taken)
            .field("served", &self.state.served)
            .finish_non_exhaustive()
    }
}

impl Line {
    /// The line of `s`, read at `now`.
    pub(crate) fn new(s: &State, now: i64) -> Line {
        let mut kept = s.clone();
        kept.keys = Vec::new();
        kept.takes = Vec::new();
        kept.hourly = Vec::new();
        kept.spill_filter = None;
        Line {
            state: Arc::new(kept),
            now,
        }
    }
}

/// Where a ticket stands ([`TicketView::state`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TicketState {
    /// It waits: [`TicketView::position`] tickets are called before it.
    Waiting,
    /// A desk shows it now ([`TicketView::desk`]): its holder is called.
    Called,
    /// It was called ([`TicketView::desk`] and [`TicketView::called_at`] when the queue still
    /// lists that call), and its desk has called another ticket since, or finished.
    Passed,
    /// It was cancelled while it waited.
    Cancelled,
    /// It no longer waits and no desk shows it, and whether it was called or cancelled is no
    /// longer kept: the line moved past it (a ticket cancelled at the head of the line, or
    /// called longer ago than the calls the queue keeps).
    Done,
    /// No ticket of this serial was handed out (yet).
    NotTaken,
}

impl TicketState {
    /// The state's name in JSON: `waiting`, `called`, `passed`, `cancelled`, `done`,
    /// `not_taken`.
    pub fn as_str(self) -> &'static str {
        match self {
            TicketState::Waiting => "waiting",
            TicketState::Called => "called",
            TicketState::Passed => "passed",
            TicketState::Cancelled => "cancelled",
            TicketState::Done => "done",
            TicketState::NotTaken => "not_taken",
        }
    }
}

/// One ticket of a queue, followed ([`QueueState::ticket`](super::QueueState::ticket)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TicketView {
    /// The ticket's serial (which ticket of the queue's history: the `serial`-th taken).
    pub serial: u64,
    /// Its number under the queue's range.
    pub number: i64,
    /// As people see it.
    pub label: String,
    /// Where it stands.
    pub state: TicketState,
    /// How many tickets are called before it, while it waits.
    pub position: Option<u64>,
    /// The estimated wait until it is called, while it waits and the pace of calls is known.
    pub estimated_wait: Option<Duration>,
    /// The desk that calls (or called) it, when it named one and the queue still lists it.
    pub desk: Option<String>,
    /// When it was called (or last recalled), when the queue still lists it.
    pub called_at: Option<DateTime>,
    /// The queue's incarnation: a serial names a ticket only within one (a queue deleted and
    /// created again starts its serials anew).
    pub incarnation: ObjectId,
    /// The queue's version the view was read at.
    pub version: i64,
}

impl TicketView {
    /// The view as JSON, as the service answers `GET /v1/queues/{name}/tickets/{serial}`:
    /// `{"serial", "ticket", "label", "state", "position", "estimated_wait_seconds", "desk",
    /// "called_at", "incarnation", "version"}` (`position`, `estimated_wait_seconds`, `desk`
    /// and `called_at` may be `null`).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// let mine = q.take().await?;
    /// println!("{}", q.peek().await?.ticket(mine.serial).to_json());
    /// # Ok(()) }
    /// ```
    pub fn to_json(&self) -> Value {
        json!({
            "serial": self.serial,
            "ticket": self.number,
            "label": self.label,
            "state": self.state.as_str(),
            "position": self.position,
            "estimated_wait_seconds": self.estimated_wait.map(|d| d.as_secs()),
            "desk": self.desk,
            "called_at": self.called_at.and_then(|t| t.try_to_rfc3339_string().ok()),
            "incarnation": self.incarnation.to_hex(),
            "version": self.version,
        })
    }
}

impl Line {
    /// Where the ticket of `serial` stands in the state this line was read from (see
    /// [`QueueState::ticket`](super::QueueState::ticket)).
    pub(crate) fn ticket(&self, serial: u64) -> TicketView {
        let s = &*self.state;
        let at = i64::try_from(serial).unwrap_or(i64::MAX);
        let number = s.spec.ticket(serial);
        let mut view = TicketView {
            serial,
            number,
            label: s.spec.label(number),
            state: TicketState::NotTaken,
            position: None,
            estimated_wait: None,
            desk: None,
            called_at: None,
            incarnation: s.incarnation,
            version: s.version,
        };
        let shown = |desk: &str| (!desk.is_empty()).then(|| desk.to_owned());
        if at < 1 || at > s.taken {
            return view;
        }
        if let Some(d) = s.desks.iter().find(|d| d.serial == at) {
            view.state = TicketState::Called;
            view.desk = shown(&d.desk);
            view.called_at = Some(DateTime::from_millis(d.at));
            return view;
        }
        if let Some(p) = s.position(at) {
            view.state = TicketState::Waiting;
            view.position = Some(p);
            view.estimated_wait = s.estimate_s(p, self.now).map(Duration::from_secs);
            return view;
        }
        let kind = s
            .out_of_line
            .iter()
            .find(|x| x.from <= at && at <= x.to)
            .map(|x| x.kind);
        let call = s.calls.iter().find(|c| c.serial == at && !c.recall);
        view.state = match (kind, call) {
            (Some(Kind::Cancelled), _) => TicketState::Cancelled,
            (Some(Kind::Void), _) => TicketState::NotTaken,
            (Some(Kind::Called), _) | (None, Some(_)) => TicketState::Passed,
            (None, None) => TicketState::Done,
        };
        if view.state == TicketState::Passed
            && let Some(c) = call
        {
            view.desk = shown(&c.desk);
            view.called_at = Some(DateTime::from_millis(c.at));
        }
        view
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::QueueSpec;
    use crate::queue::QueueState;
    use crate::queue::state::{Named, Op, Step, Target};

    fn apply(s: &mut State, op: Op, now: i64) {
        match s.apply(&op, now).expect("allowed") {
            Step::Write(next, _, _) => *s = *next,
            Step::Answer(_) => {}
        }
    }

    fn take(s: &mut State, now: i64) {
        apply(
            s,
            Op::Take {
                count: 1,
                key: None,
            },
            now,
        );
    }

    fn call(s: &mut State, desk: &str, serial: Option<i64>, now: i64) {
        apply(
            s,
            Op::Call {
                desk: desk.into(),
                ticket: serial.map(|serial| Named {
                    serial,
                    incarnation: None,
                }),
            },
            now,
        );
    }

    fn view(s: &State, serial: u64, now: i64) -> TicketView {
        QueueState::new("q".into(), s, now).ticket(serial)
    }

    /// Every state a followed ticket goes through, its place beyond the listed waiting
    /// tickets, and the estimate the status itself gives for the same place.
    #[test]
    fn a_ticket_is_followed_from_its_take_to_its_call_and_past_it() {
        let mut s = State::new(
            QueueSpec::default().with_max(999),
            ObjectId::new(),
            1_000_000,
        );
        let mut now = 1_000_000;
        for _ in 0..120 {
            now += 1000;
            take(&mut s, now);
        }
        assert_eq!(view(&s, 121, now).state, TicketState::NotTaken);
        assert_eq!(view(&s, 0, now).state, TicketState::NotTaken);
        // Four calls 30 s apart at desk 1: the pace is known.
        for _ in 0..4 {
            now += 30_000;
            call(&mut s, "1", None, now);
        }
        let v = view(&s, 100, now);
        assert_eq!(
            (v.state, v.position, v.number, v.label.as_str()),
            (TicketState::Waiting, Some(95), 100, "100")
        );
        assert_eq!(
            v.estimated_wait,
            s.estimate_s(95, now).map(Duration::from_secs)
        );
        assert!(v.estimated_wait.is_some());
        // The last ticket waiting: its place is the status's count less one.
        let last = view(&s, 120, now);
        let status = QueueState::new("q".into(), &s, now);
        assert_eq!(last.position, Some(status.waiting - 1));
        assert_eq!(
            last.estimated_wait,
            status.estimated_wait.map(|d| d - Duration::from_secs(30))
        );
        // Ticket 4 is shown by desk 1; 3 was called at desk 1 before it and passed.
        let shown = view(&s, 4, now);
        assert_eq!(
            (shown.state, shown.desk.as_deref()),
            (TicketState::Called, Some("1"))
        );
        assert_eq!(shown.called_at, Some(DateTime::from_millis(now)));
        let passed = view(&s, 3, now);
        assert_eq!(
            (passed.state, passed.desk.as_deref()),
            (TicketState::Passed, Some("1"))
        );
        assert_eq!(passed.called_at, Some(DateTime::from_millis(now - 30_000)));
        // Cancelled out of line, and those behind it move up; an out-of-order call at desk 2.
        apply(
            &mut s,
            Op::Cancel {
                target: Target::Ticket(Named {
                    serial: 50,
                    incarnation: None,
                }),
            },
            now,
        );
        call(&mut s, "2", Some(60), now);
        assert_eq!(view(&s, 50, now).state, TicketState::Cancelled);
        let sixty = view(&s, 60, now);
        assert_eq!(
            (sixty.state, sixty.desk.as_deref()),
            (TicketState::Called, Some("2"))
        );
        assert_eq!(view(&s, 100, now).position, Some(93));
        // Desk 2 calls the next in line: 60 is passed, out of line, still with its desk.
        call(&mut s, "2", None, now + 1);
        let sixty = view(&s, 60, now + 1);
        assert_eq!(
            (sixty.state, sixty.desk.as_deref()),
            (TicketState::Passed, Some("2"))
        );
        // A call without a desk: shown with no desk name.
        call(&mut s, "", None, now + 2);
        let plain = view(&s, 6, now + 2);
        assert_eq!((plain.state, plain.desk), (TicketState::Called, None));
        // Long past: more calls than the queue keeps, the cursor beyond them.
        for i in 0..40 {
            call(&mut s, "1", None, now + 3 + i);
        }
        assert_eq!(view(&s, 3, now + 50).state, TicketState::Done);
        let json = view(&s, 100, now + 50).to_json();
        assert_eq!(json["state"], "waiting");
        assert_eq!(json["incarnation"], s.incarnation.to_hex());
        assert_eq!(json["version"], s.version);
    }
}
