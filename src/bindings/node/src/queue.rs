//! Ticket queues: take a ticket, call the next one, from several desks.

use dispenser::jiff::tz::TimeZone;
use dispenser::queue::{QueueAlter, QueueSpec, QueueState, Ticket};
use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;
use serde_json::Value;

use crate::convert::{ForceOptions, Int, Json, JsonList, count, forced, int, invalid, opt_int};
use crate::dispenser::history_read;
use crate::dispenser::{Dispenser, ListOptions, error_json};
use crate::promise::promise;
use crate::sequence::format;

/// A queue's range, label format, time zone and daily restart.
#[napi(object)]
pub struct QueueSpecInput {
    /// The lowest ticket (shown last in a round). Defaults to 0.
    pub min: Option<Int>,
    /// The highest ticket. Defaults to 99.
    pub max: Option<Int>,
    /// How tickets are shown (`A-{n:03}`). Defaults to the number.
    pub format: Option<String>,
    /// The IANA time zone of the queue's day and hours. Defaults to `UTC`.
    pub time_zone: Option<String>,
    /// Whether each local day starts again at the first ticket. Defaults to false.
    pub daily: Option<bool>,
}

/// A take's request id (to retry it safely) and caller.
#[napi(object)]
pub struct TakeOptions {
    /// The same id again answers the same tickets and takes nothing more.
    pub request_id: Option<String>,
    /// Whose request id it is. Defaults to the dispenser's caller.
    pub caller: Option<String>,
}

/// A call's desk and, to call out of order, the ticket (by its identity).
#[napi(object)]
pub struct CallOptions {
    /// The desk that calls (it then shows the ticket). Defaults to the desk without a name.
    pub desk: Option<String>,
    /// Call the waiting ticket of this serial rather than the oldest (checked in the same
    /// write to be that ticket and to wait; a number read off a board: `waitingTicket`).
    pub serial: Option<Int>,
    /// With `serial`: the queue's incarnation the ticket was taken from (`ticket.incarnation`).
    pub incarnation: Option<String>,
}

/// The desk a recall or finish acts for, and the ticket it must still show.
#[napi(object)]
pub struct DeskOptions {
    /// The desk. Defaults to the desk without a name.
    pub desk: Option<String>,
    /// Only while the desk shows the ticket of this serial.
    pub serial: Option<Int>,
    /// With `serial`: the queue's incarnation the ticket was taken from.
    pub incarnation: Option<String>,
}

/// The ticket a cancel names: its serial, or the request id of the take that got it.
#[napi(object)]
pub struct CancelOptions {
    /// The ticket's serial (`ticket.serial`).
    pub serial: Option<Int>,
    /// With `serial`: the queue's incarnation the ticket was taken from.
    pub incarnation: Option<String>,
    /// The request id of the take that got the ticket (a give-up).
    pub request_id: Option<String>,
    /// Whose request id it is. Defaults to the dispenser's caller.
    pub caller: Option<String>,
}

/// A serial given as a number or a bigint, and an incarnation in hex.
fn identity(
    serial: Option<Int>,
    incarnation: Option<String>,
) -> napi::Result<(Option<u64>, Option<dispenser::mongodb::bson::oid::ObjectId>)> {
    let serial = serial.map(|s| count("serial", s)).transpose()?;
    let incarnation = incarnation
        .map(|h| {
            dispenser::mongodb::bson::oid::ObjectId::parse_str(&h).map_err(|_| {
                invalid(
                    "incarnation",
                    format!("{h:?} is not a queue's incarnation: 24 hexadecimal digits, as a ticket's `incarnation` gives it"),
                )
            })
        })
        .transpose()?;
    Ok((serial, incarnation))
}

/// What `Queue.alter` changes.
#[napi(object)]
pub struct QueueAlterInput {
    /// The highest ticket.
    pub max: Option<Int>,
}

fn spec(input: Option<QueueSpecInput>) -> napi::Result<QueueSpec> {
    let mut s = QueueSpec::default();
    let Some(i) = input else { return Ok(s) };
    if let Some(v) = opt_int("min", i.min)? {
        s = s.with_min(v);
    }
    if let Some(v) = opt_int("max", i.max)? {
        s = s.with_max(v);
    }
    if let Some(f) = i.format {
        s = s.with_format(format(&f)?);
    }
    if let Some(z) = i.time_zone {
        let tz = TimeZone::get(&z).map_err(|e| invalid("time zone", format!("{z:?}: {e}")))?;
        s = s.with_time_zone(&tz);
    }
    if let Some(d) = i.daily {
        s = s.with_daily(d);
    }
    Ok(s)
}

fn statuses(v: Vec<dispenser::Result<QueueState>>) -> JsonList {
    JsonList(
        v.into_iter()
            .map(|r| match r {
                Ok(s) => s.to_json(),
                Err(e) => error_json(&e),
            })
            .collect(),
    )
}

fn tickets(v: Vec<Ticket>) -> JsonList {
    JsonList(v.iter().map(Ticket::to_json).collect())
}

#[napi]
impl Dispenser {
    /// Creates the queue `name`; fails `AlreadyExists` when it exists.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi]
    pub fn create_queue<'env>(
        &self,
        env: &'env Env,
        name: String,
        spec: Option<QueueSpecInput>,
    ) -> napi::Result<PromiseRaw<'env, Queue>> {
        promise!(env, self.inner, |inner| {
            let s = crate::queue::spec(spec)?;
            let inner = inner.create_queue(&name, s).await?;
            Ok(Queue { inner })
        })
    }

    /// Creates the queue `name`, or opens it when it exists with the same spec.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi]
    pub fn ensure_queue<'env>(
        &self,
        env: &'env Env,
        name: String,
        spec: Option<QueueSpecInput>,
    ) -> napi::Result<PromiseRaw<'env, Queue>> {
        promise!(env, self.inner, |inner| {
            let s = crate::queue::spec(spec)?;
            let inner = inner.ensure_queue(&name, s).await?;
            Ok(Queue { inner })
        })
    }

    /// Opens the existing queue `name`.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi]
    pub fn open_queue<'env>(
        &self,
        env: &'env Env,
        name: String,
    ) -> napi::Result<PromiseRaw<'env, Queue>> {
        promise!(env, self.inner, |inner| {
            let inner = inner.open_queue(&name).await?;
            Ok(Queue { inner })
        })
    }

    /// One page of the queues' statuses, by name.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Array<QueueState | ListingError>>")]
    pub fn list_queues<'env>(
        &self,
        env: &'env Env,
        options: Option<ListOptions>,
    ) -> napi::Result<PromiseRaw<'env, JsonList>> {
        promise!(env, self.inner, |inner| {
            let (list, _) = crate::page!(inner.list_queues(), options);
            Ok(statuses(list.await?))
        })
    }

    /// Deletes the queue `name`; refused (a ConflictError, code `queue_in_use`) while people
    /// wait, unless `{ force: true }` (recorded in the history).
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn delete_queue<'env>(
        &self,
        env: &'env Env,
        name: String,
        options: Option<ForceOptions>,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        let force = forced(options);
        promise!(env, self.inner, |inner| {
            Ok(inner.delete_queue(&name).force(force).await?)
        })
    }
}

/// A ticket queue.
#[napi]
pub struct Queue {
    inner: dispenser::queue::Queue,
}

#[napi]
impl Queue {
    /// The queue's name.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// The settings the `ensure` that opened this handle found changed since by an alter,
    /// each `{ setting, stored, asked }`: the stored value is kept, the asked one not applied.
    /// Empty for a handle from `create` or `open`, or when everything matched.
    #[napi(getter, ts_return_type = "Array<Altered>")]
    pub fn altered(&self) -> crate::convert::Json {
        crate::convert::altered(self.inner.altered())
    }

    /// Takes the next ticket.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Ticket>")]
    pub fn take<'env>(
        &self,
        env: &'env Env,
        options: Option<TakeOptions>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let mut t = inner.take();
            if let Some(o) = options {
                if let Some(id) = o.request_id {
                    t = t.request_id(id);
                }
                if let Some(c) = o.caller {
                    t = t.caller(c);
                }
            }
            Ok(Json(t.await?.to_json()))
        })
    }

    /// Takes `count` consecutive tickets, all or nothing (a family).
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Array<Ticket>>")]
    pub fn take_many<'env>(
        &self,
        env: &'env Env,
        n: Int,
        options: Option<TakeOptions>,
    ) -> napi::Result<PromiseRaw<'env, JsonList>> {
        promise!(env, self.inner, |inner| {
            let n = count("ticket count", n)?;
            let mut t = inner.take().count(n);
            if let Some(o) = options {
                if let Some(id) = o.request_id {
                    t = t.request_id(id);
                }
                if let Some(c) = o.caller {
                    t = t.caller(c);
                }
            }
            Ok(tickets(t.await?))
        })
    }

    /// Calls the oldest waiting ticket (or `ticket`), from a desk.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Ticket>")]
    pub fn call<'env>(
        &self,
        env: &'env Env,
        options: Option<CallOptions>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let mut c = inner.call();
            if let Some(o) = options {
                if let Some(d) = o.desk {
                    c = c.desk(d);
                }
                let (serial, incarnation) = identity(o.serial, o.incarnation)?;
                if let Some(s) = serial {
                    c = c.serial(s);
                }
                if let Some(i) = incarnation {
                    c = c.incarnation(i);
                }
            }
            Ok(Json(c.await?.to_json()))
        })
    }

    /// Announces again the ticket a desk shows.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Ticket>")]
    pub fn recall<'env>(
        &self,
        env: &'env Env,
        options: Option<DeskOptions>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let mut r = inner.recall();
            if let Some(o) = options {
                if let Some(d) = o.desk {
                    r = r.desk(d);
                }
                let (serial, incarnation) = identity(o.serial, o.incarnation)?;
                if let Some(s) = serial {
                    r = r.serial(s);
                }
                if let Some(i) = incarnation {
                    r = r.incarnation(i);
                }
            }
            Ok(Json(r.await?.to_json()))
        })
    }

    /// A desk is done with the ticket it shows, and shows none.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Ticket>")]
    pub fn finish<'env>(
        &self,
        env: &'env Env,
        options: Option<DeskOptions>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let mut r = inner.finish();
            if let Some(o) = options {
                if let Some(d) = o.desk {
                    r = r.desk(d);
                }
                let (serial, incarnation) = identity(o.serial, o.incarnation)?;
                if let Some(s) = serial {
                    r = r.serial(s);
                }
                if let Some(i) = incarnation {
                    r = r.incarnation(i);
                }
            }
            Ok(Json(r.await?.to_json()))
        })
    }

    /// Cancels a waiting ticket, named by its serial or by its take's request id; the write
    /// checks that very ticket still waits.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Ticket>")]
    pub fn cancel<'env>(
        &self,
        env: &'env Env,
        options: CancelOptions,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let mut c = inner.cancel();
            let (serial, incarnation) = identity(options.serial, options.incarnation)?;
            if let Some(s) = serial {
                c = c.serial(s);
            }
            if let Some(i) = incarnation {
                c = c.incarnation(i);
            }
            if let Some(id) = options.request_id {
                c = c.request_id(id);
            }
            if let Some(who) = options.caller {
                c = c.caller(who);
            }
            Ok(Json(c.await?.to_json()))
        })
    }

    /// The ticket that waits with `number` (read once): act on it by its serial.
    ///
    /// # Cancel safety
    ///
    /// It only reads.
    #[napi(ts_return_type = "Promise<Ticket>")]
    pub fn waiting_ticket<'env>(
        &self,
        env: &'env Env,
        number: Int,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let n = int("number", number)?;
            Ok(Json(inner.waiting_ticket(n).await?.to_json()))
        })
    }

    /// Changes the queue's range.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<QueueState>")]
    pub fn alter<'env>(
        &self,
        env: &'env Env,
        change: QueueAlterInput,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let mut a = QueueAlter::default();
            if let Some(m) = opt_int("max", change.max)? {
                a = a.with_max(m);
            }
            Ok(Json(inner.alter(a).await?.to_json()))
        })
    }

    /// Deletes the queue.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn delete<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        promise!(env, self.inner, |inner| Ok(inner.delete().await?))
    }

    /// Who changed it, when, how: the recorded operations, oldest first (`options`: `since`,
    /// `after`, `limit`).
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Array<HistoryEntry>>")]
    pub fn history<'env>(
        &self,
        env: &'env Env,
        options: Option<crate::dispenser::HistoryOptions>,
    ) -> napi::Result<PromiseRaw<'env, crate::convert::JsonList>> {
        promise!(env, self.inner, |inner| history_read(
            inner.history(),
            options
        )
        .await)
    }

    /// The queue's status: who waits, what each desk shows, the recent calls.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<QueueState>")]
    pub fn peek<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let s: Value = inner.peek().await?.to_json();
            Ok(Json(s))
        })
    }
}
