//! The queue's actions as builders: [`Queue::take`], [`Queue::call`], [`Queue::recall`],
//! [`Queue::finish`], [`Queue::cancel`] and the deletes ([`Queue::delete`], [`Dispenser::delete_queue`]) each
//! return a value on which the options are set, and that is `.await`ed — one method per
//! action, no twins — in the way of the `mongodb` driver's actions:
//!
//! ```no_run
//! # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
//! let one = lobby.take().await?; // a Ticket
//! let family = lobby.take().count(3).request_id("kiosk-1/000042").await?; // a Vec<Ticket>
//! let next = lobby.call().desk("2").await?;
//! lobby.recall().desk("2").await?;
//! lobby.delete().force(true).await?; // even while tickets are held
//! # Ok(()) }
//! ```
//!
//! Nothing is sent before the `.await`; a builder dropped unawaited does nothing.

use std::future::{Future, IntoFuture};
use std::pin::Pin;

use bson::oid::ObjectId;

use super::state::Named;
use super::{Queue, QueueCounters, QueueState, Ticket};
use crate::dispenser::Dispenser;
use crate::error::{Error, Result};
use crate::listing::Page;

/// The future an action's `.await` runs.
type Action<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// The ticket an act names by its identity: a serial, pinned to an incarnation when one is
/// given (an incarnation alone names nothing).
#[derive(Clone, Copy, Debug, Default)]
struct Identity {
    serial: Option<u64>,
    incarnation: Option<ObjectId>,
}

impl Identity {
    /// The ticket named, checked: `None` when no serial was given.
    fn named(self, queue: &Queue, act: &str) -> Result<Option<Named>> {
        let what = || format!("{act} of a ticket of queue {:?}", queue.name());
        match (self.serial, self.incarnation) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(Error::invalid_argument(
                what(),
                "an incarnation alone names no ticket: give the ticket's serial too",
            )),
            (Some(serial), incarnation) => {
                let serial = i64::try_from(serial)
                    .ok()
                    .filter(|s| *s >= 1)
                    .ok_or_else(|| {
                        Error::invalid_argument(
                            what(),
                            format!(
                                "serial {serial} is not a serial: they run from 1 to {}",
                                i64::MAX
                            ),
                        )
                    })?;
                Ok(Some(Named {
                    serial,
                    incarnation,
                }))
            }
        }
    }
}

/// A take of one ticket ([`Queue::take`]); `.count(n)` makes it a take of a family
/// ([`TakeMany`]). `.await` it for the [`Ticket`].
#[must_use = "a take does nothing until it is awaited"]
#[derive(Debug)]
pub struct Take<'a> {
    queue: &'a Queue,
    request_id: Option<String>,
    caller: Option<String>,
}

impl<'a> Take<'a> {
    pub(super) fn new(queue: &'a Queue) -> Self {
        Take {
            queue,
            request_id: None,
            caller: None,
        }
    }

    /// A request id (1–64 printable ASCII characters): the same id from the same caller
    /// within 24 hours (by the server's clock) answers the tickets its first take got, marked
    /// [`Ticket::replayed`], and takes nothing more — a take safe to retry.
    pub fn request_id(mut self, id: impl Into<String>) -> Self {
        self.request_id = Some(id.into());
        self
    }

    /// Whose request id it is (1–128 printable ASCII characters): ids are scoped to their
    /// caller, so two callers (two kiosks) that pick the same id never share a take. Without
    /// it, the handle's caller ([`Options::caller`](crate::Options::caller), or the unnamed
    /// caller).
    pub fn caller(mut self, caller: impl Into<String>) -> Self {
        self.caller = Some(caller.into());
        self
    }

    /// Takes `count` tickets (≥ 1) at once — a family — all or nothing: `count` consecutive
    /// tickets in one write, in the order they will be called, or
    /// [`Error::QueueFull`](crate::Error::QueueFull) and nothing taken when fewer fit.
    pub fn count(self, count: u64) -> TakeMany<'a> {
        TakeMany {
            queue: self.queue,
            count,
            request_id: self.request_id,
            caller: self.caller,
        }
    }
}

impl<'a> IntoFuture for Take<'a> {
    type Output = Result<Ticket>;
    type IntoFuture = Action<'a, Ticket>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let mut tickets = self.queue.take_now(1, self.request_id, self.caller).await?;
            tickets
                .pop()
                .ok_or_else(|| super::no_such(self.queue.name()))
        })
    }
}

/// A take of a family of tickets ([`Take::count`]). `.await` it for the tickets, in the
/// order they will be called.
#[must_use = "a take does nothing until it is awaited"]
#[derive(Debug)]
pub struct TakeMany<'a> {
    queue: &'a Queue,
    count: u64,
    request_id: Option<String>,
    caller: Option<String>,
}

impl TakeMany<'_> {
    /// As [`Take::request_id`]; the same id again must ask for the same count.
    pub fn request_id(mut self, id: impl Into<String>) -> Self {
        self.request_id = Some(id.into());
        self
    }

    /// As [`Take::caller`].
    pub fn caller(mut self, caller: impl Into<String>) -> Self {
        self.caller = Some(caller.into());
        self
    }
}

impl<'a> IntoFuture for TakeMany<'a> {
    type Output = Result<Vec<Ticket>>;
    type IntoFuture = Action<'a, Vec<Ticket>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(
            self.queue
                .take_now(self.count, self.request_id, self.caller),
        )
    }
}

/// A call ([`Queue::call`]): the oldest waiting ticket, from the desk without a name, unless
/// set otherwise. `.await` it for the [`Ticket`] called.
#[must_use = "a call does nothing until it is awaited"]
#[derive(Debug)]
pub struct Call<'a> {
    queue: &'a Queue,
    desk: Option<String>,
    ticket: Identity,
}

impl<'a> Call<'a> {
    pub(super) fn new(queue: &'a Queue) -> Self {
        Call {
            queue,
            desk: None,
            ticket: Identity::default(),
        }
    }

    /// Calls from `desk` (1–16 letters, digits, spaces, `-`, `_`, `.`, not only spaces; the
    /// spaces at either end are dropped: `"  3 "` is desk `"3"`), which then shows that
    /// ticket, held, until it calls again or finishes.
    pub fn desk(mut self, desk: impl Into<String>) -> Self {
        self.desk = Some(desk.into());
        self
    }

    /// Calls the ticket of this [`serial`](Ticket::serial) (which must wait) out of order,
    /// once: it no longer waits. The write checks that this very ticket waits: if it was
    /// called or cancelled meanwhile, the call is refused
    /// ([`Error::TicketNotWaiting`](crate::Error::TicketNotWaiting)), even when its number
    /// came round to a newer ticket. For a number read off a board, look the ticket up first
    /// with [`Queue::waiting_ticket`].
    pub fn serial(mut self, serial: u64) -> Self {
        self.ticket.serial = Some(serial);
        self
    }

    /// With [`Call::serial`]: the incarnation of the queue the ticket was taken from
    /// ([`Ticket::incarnation`]); a queue deleted and created again since refuses the call.
    /// Defaults to whichever incarnation the queue has.
    pub fn incarnation(mut self, incarnation: ObjectId) -> Self {
        self.ticket.incarnation = Some(incarnation);
        self
    }
}

impl<'a> IntoFuture for Call<'a> {
    type Output = Result<Ticket>;
    type IntoFuture = Action<'a, Ticket>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let ticket = self.ticket.named(self.queue, "call")?;
            self.queue.call_now(self.desk, ticket).await
        })
    }
}

/// A recall ([`Queue::recall`]: announces again the ticket a desk shows) or a finish
/// ([`Queue::finish`]: the desk is done with it and shows none), of the desk without a name
/// unless [`AtDesk::desk`]. `.await` it for that [`Ticket`].
#[must_use = "a recall or a finish does nothing until it is awaited"]
#[derive(Debug)]
pub struct AtDesk<'a> {
    queue: &'a Queue,
    desk: Option<String>,
    finish: bool,
    ticket: Identity,
}

impl<'a> AtDesk<'a> {
    pub(super) fn recall(queue: &'a Queue) -> Self {
        AtDesk {
            queue,
            desk: None,
            finish: false,
            ticket: Identity::default(),
        }
    }

    pub(super) fn finish(queue: &'a Queue) -> Self {
        AtDesk {
            queue,
            desk: None,
            finish: true,
            ticket: Identity::default(),
        }
    }

    /// The desk (1–16 letters, digits, spaces, `-`, `_`, `.`, not only spaces; the spaces at
    /// either end are dropped, as for [`Call::desk`]).
    pub fn desk(mut self, desk: impl Into<String>) -> Self {
        self.desk = Some(desk.into());
        self
    }

    /// Only if the desk still shows the ticket of this [`serial`](Ticket::serial) (what an
    /// operator's screen showed when the button was pressed): checked in the same write, so a
    /// recall or finish meant for one ticket never lands on the next one the desk called.
    /// Refused otherwise ([`Error::TicketNotWaiting`](crate::Error::TicketNotWaiting)).
    pub fn serial(mut self, serial: u64) -> Self {
        self.ticket.serial = Some(serial);
        self
    }

    /// With [`AtDesk::serial`]: the incarnation of the queue the ticket was taken from
    /// ([`Ticket::incarnation`]).
    pub fn incarnation(mut self, incarnation: ObjectId) -> Self {
        self.ticket.incarnation = Some(incarnation);
        self
    }
}

impl<'a> IntoFuture for AtDesk<'a> {
    type Output = Result<Ticket>;
    type IntoFuture = Action<'a, Ticket>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let act = if self.finish { "finish" } else { "recall" };
            let ticket = self.ticket.named(self.queue, act)?;
            self.queue.at_desk(self.desk, self.finish, ticket).await
        })
    }
}

/// A cancel of one waiting ticket ([`Queue::cancel`]), named by its identity: its
/// [`serial`](Cancel::serial), or the [`request_id`](Cancel::request_id) of the take that got
/// it. `.await` it for the [`Ticket`] cancelled.
#[must_use = "a cancel does nothing until it is awaited"]
#[derive(Debug)]
pub struct Cancel<'a> {
    queue: &'a Queue,
    ticket: Identity,
    request_id: Option<String>,
    caller: Option<String>,
}

impl<'a> Cancel<'a> {
    pub(super) fn new(queue: &'a Queue) -> Self {
        Cancel {
            queue,
            ticket: Identity::default(),
            request_id: None,
            caller: None,
        }
    }

    /// The ticket of this [`serial`](Ticket::serial): the write checks that this very ticket
    /// still waits, so a number that came round to someone else is never cancelled in its
    /// place. For a number read off a board, look the ticket up first with
    /// [`Queue::waiting_ticket`].
    pub fn serial(mut self, serial: u64) -> Self {
        self.ticket.serial = Some(serial);
        self
    }

    /// With [`Cancel::serial`]: the incarnation of the queue the ticket was taken from
    /// ([`Ticket::incarnation`]); a queue deleted and created again since refuses the cancel.
    pub fn incarnation(mut self, incarnation: ObjectId) -> Self {
        self.ticket.incarnation = Some(incarnation);
        self
    }

    /// The ticket the take with this request id got (within 24 hours, by the same caller):
    /// what a person giving up their own ticket holds. A take of several tickets is refused:
    /// name each by its serial. When no take used the id, the cancel takes one ticket with
    /// it and cancels it in the same write — so the take, if it is still on its way, answers
    /// that cancelled ticket ([`Ticket::replayed`]) and takes nothing. The answer's
    /// [`Ticket::replayed`] is true when the take had been made before.
    pub fn request_id(mut self, id: impl Into<String>) -> Self {
        self.request_id = Some(id.into());
        self
    }

    /// Whose request id it is, as [`Take::caller`].
    pub fn caller(mut self, caller: impl Into<String>) -> Self {
        self.caller = Some(caller.into());
        self
    }
}

impl<'a> IntoFuture for Cancel<'a> {
    type Output = Result<Ticket>;
    type IntoFuture = Action<'a, Ticket>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let ticket = self.ticket.named(self.queue, "cancel")?;
            self.queue
                .cancel_now(ticket, self.request_id, self.caller)
                .await
        })
    }
}

/// A delete of a queue ([`Queue::delete`], [`Dispenser::delete_queue`]): refused while
/// tickets are held — waiting, or shown by a desk — unless [`DeleteQueue::force`]. `.await`
/// it.
#[must_use = "a delete does nothing until it is awaited"]
#[derive(Debug)]
pub struct DeleteQueue<'a> {
    dispenser: &'a Dispenser,
    name: &'a str,
    force: bool,
}

impl<'a> DeleteQueue<'a> {
    pub(super) fn new(dispenser: &'a Dispenser, name: &'a str) -> Self {
        DeleteQueue {
            dispenser,
            name,
            force: false,
        }
    }

    /// With `true`, deletes the queue even while tickets are held (and one whose document no longer
    /// decodes): the caller knows nobody waits any more — a queue created again under the
    /// name hands out its first tickets again, whoever still holds those numbers. The
    /// history records the force. Defaults to false.
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }
}

impl<'a> IntoFuture for DeleteQueue<'a> {
    type Output = Result<()>;
    type IntoFuture = Action<'a, ()>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.dispenser.delete_queue_now(self.name, self.force))
    }
}

/// A listing of queues ([`Dispenser::list_queues`]): every queue by name, unless narrowed.
/// `.await` it for their states, by name; a document that does not decode is an
/// [`Error::CorruptDocument`](crate::Error::CorruptDocument) in its place. The options are
/// those of a listing of sequences ([`ListSequences`](crate::sequence::ListSequences)).
///
/// # Errors
///
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the limit is 0;
/// [`Error::Database`](crate::Error::Database) or [`Error::Timeout`](crate::Error::Timeout)
/// when the collection cannot be read.
#[must_use = "a listing does nothing until it is awaited"]
#[derive(Debug)]
pub struct ListQueues<'a> {
    dispenser: &'a Dispenser,
    page: Page,
}

impl<'a> ListQueues<'a> {
    pub(super) fn new(dispenser: &'a Dispenser) -> Self {
        ListQueues {
            dispenser,
            page: Page::default(),
        }
    }

    crate::listing::page_setters!("queues");

    /// Their counters only (taken, called, waiting, cancelled and the last calls), read
    /// through a projection of those fields, so the cost does not grow with the queues'
    /// histories (what a metrics scrape reads).
    pub fn counters(self) -> ListQueueCounters<'a> {
        ListQueueCounters(self)
    }
}

impl<'a> IntoFuture for ListQueues<'a> {
    type Output = Result<Vec<Result<QueueState>>>;
    type IntoFuture = Action<'a, Vec<Result<QueueState>>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let limit = self
                .page
                .find_limit("limit of a page of queues", "queues")?;
            if self.page.is_none() {
                return Ok(Vec::new());
            }
            self.dispenser
                .queues()
                .list(self.page.filter(), limit)
                .await
        })
    }
}

/// A listing of the queues' counters ([`ListQueues::counters`]). `.await` it for them, by
/// name.
#[must_use = "a listing does nothing until it is awaited"]
#[derive(Debug)]
pub struct ListQueueCounters<'a>(ListQueues<'a>);

impl<'a> IntoFuture for ListQueueCounters<'a> {
    type Output = Result<Vec<Result<QueueCounters>>>;
    type IntoFuture = Action<'a, Vec<Result<QueueCounters>>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let ListQueues { dispenser, page } = self.0;
            let limit = page.find_limit("limit of a page of queues", "queues")?;
            if page.is_none() {
                return Ok(Vec::new());
            }
            dispenser.queues().list_counters(page.filter(), limit).await
        })
    }
}
