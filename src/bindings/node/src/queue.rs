//! Ticket queues: take a ticket, call the next one, from several desks.

use dispenser::queue::{QueueAlter, QueueSpec, QueueState, Ticket};
use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;
use serde_json::Value;

use crate::abort::{Signal, SignalOptions};
use crate::convert::{ForceOptions, Int, Json, JsonList, count, forced, int, invalid, js, opt_int};
use crate::dispenser::history_read;
use crate::dispenser::{Dispenser, ListOptions, error_json};
use crate::promise::promise;

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
    /// Aborts the call (see `SignalOptions`).
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<Signal>,
}

/// A take's count (a family), request id (to retry it safely) and caller.
#[napi(object)]
pub struct TakeOptions {
    /// Takes this many consecutive tickets, all or nothing (a family), and answers them as
    /// an array. Without it, one ticket, answered as it is.
    pub count: Option<Int>,
    /// The same id again answers the same tickets and takes nothing more.
    pub request_id: Option<String>,
    /// Whose request id it is. Defaults to the dispenser's caller.
    pub caller: Option<String>,
    /// Aborts the call (see `SignalOptions`).
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<Signal>,
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
    /// Aborts the call (see `SignalOptions`).
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<Signal>,
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
    /// Aborts the call (see `SignalOptions`).
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<Signal>,
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
    /// Aborts the call (see `SignalOptions`).
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<Signal>,
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
    let Some(i) = input else {
        return Ok(QueueSpec::default());
    };
    let zone = i.time_zone.as_deref().map(|z| ("timeZone", z));
    dispenser::translate::queue_spec(
        opt_int("min", i.min)?,
        opt_int("max", i.max)?,
        i.format.as_deref(),
        zone,
        i.daily,
    )
    .map_err(js)
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

#[napi]
impl Dispenser {
    /// Creates the queue `name`; fails `AlreadyExists` when it exists.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
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
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
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
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn open_queue<'env>(
        &self,
        env: &'env Env,
        name: String,
        _options: Option<SignalOptions>,
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
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
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
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
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

    /// The same queue acting as `caller`: the name its takes' request ids are scoped to and
    /// its history records.
    #[napi]
    pub fn with_caller(&self, caller: String) -> napi::Result<Queue> {
        let inner = self.inner.with_caller(&caller).map_err(js)?;
        Ok(Queue { inner })
    }

    /// The settings the `ensure` that opened this handle found changed since by an alter,
    /// each `{ setting, stored, asked }`: the stored value is kept, the asked one not applied.
    /// Empty for a handle from `create` or `open`, or when everything matched.
    #[napi(getter, ts_return_type = "Array<Altered>")]
    pub fn altered(&self) -> crate::convert::Json {
        crate::convert::altered(self.inner.altered())
    }

    /// Takes the next ticket; with `count`, that many consecutive tickets, all or nothing (a
    /// family), as an array.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(
        ts_generic_types = "O extends TakeOptions = TakeOptions",
        ts_args_type = "options?: O",
        ts_return_type = "Promise<O extends { count: Int } ? Array<Ticket> : Ticket>"
    )]
    pub fn take<'env>(
        &self,
        env: &'env Env,
        options: Option<TakeOptions>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let (n, request_id, caller) = match options {
                Some(o) => (o.count, o.request_id, o.caller),
                None => (None, None, None),
            };
            let mut t = inner.take();
            if let Some(id) = request_id {
                t = t.request_id(id);
            }
            if let Some(c) = caller {
                t = t.caller(c);
            }
            Ok(match n {
                None => Json(t.await?.to_json()),
                Some(n) => {
                    let family = t.count(count("ticket count", n)?).await?;
                    Json(Value::Array(family.iter().map(Ticket::to_json).collect()))
                }
            })
        })
    }

    /// Calls the oldest waiting ticket (or `ticket`), from a desk.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
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
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
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
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
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
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
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
        _options: Option<SignalOptions>,
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
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<QueueState>")]
    pub fn alter<'env>(
        &self,
        env: &'env Env,
        change: QueueAlterInput,
        _options: Option<SignalOptions>,
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
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn delete<'env>(
        &self,
        env: &'env Env,
        options: Option<ForceOptions>,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        let force = forced(options);
        promise!(env, self.inner, |inner| Ok(inner
            .delete()
            .force(force)
            .await?))
    }

    /// Who changed it, when, how: the recorded operations, oldest first (`options`: `since`,
    /// `after`, `limit`).
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
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
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<QueueState>")]
    pub fn peek<'env>(
        &self,
        env: &'env Env,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let s: Value = inner.peek().await?.to_json();
            Ok(Json(s))
        })
    }
}
