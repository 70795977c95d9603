//! `Dispenser`: one collection of sequences — connect, create, ensure, open and administer.

use dispenser::{Options, Spec};
use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;
use serde_json::{Value, json};

use crate::abort::{Signal, SignalOptions};
use crate::convert::{Int, Json, JsonList, invalid, js, millis, opt_int};
use crate::promise::{Answer, promise};
use crate::sequence::Sequence;

/// Where the documents live and how the dispenser acts (`Dispenser.connect`'s options).
#[napi(object)]
pub struct ConnectOptions {
    /// The database holding the sequence documents. Defaults to `"dispenser"`.
    pub database: Option<String>,
    /// The collection holding the sequence documents. Defaults to `"dispensers"`.
    pub collection: Option<String>,
    /// Who is acting: the name queue request ids are scoped to and the history records.
    pub caller: Option<String>,
    /// The longest one database operation may take, in milliseconds. Defaults to 10 000.
    pub operation_timeout_ms: Option<f64>,
    /// Whether concurrent draws on one handle share writes. Defaults to true.
    pub coalesce: Option<bool>,
    /// How numbers are drawn: `"inc"` (the conditional increment, the default) or `"cas"`
    /// (read, then compare-and-set).
    #[napi(ts_type = "'inc' | 'cas'")]
    pub strategy: Option<String>,
    /// What the integers the API answers are: `"bigint"` (the default: exact over the whole
    /// 64-bit range) or `"number"` (JavaScript numbers; a number issued past
    /// `Number.MAX_SAFE_INTEGER` is refused). See the guide's chapter on Node.js.
    #[napi(ts_type = "Numbers")]
    pub numbers: Option<String>,
}

/// A sequence's shape: the first number, the step, the bounds and whether it wraps.
#[napi(object)]
pub struct SpecInput {
    /// The first number issued. Defaults to 1.
    pub start: Option<Int>,
    /// The distance between consecutive numbers (negative: descending). Defaults to 1.
    pub step: Option<Int>,
    /// The lowest number. Defaults to 0.
    pub min: Option<Int>,
    /// The highest number. Defaults to 2^63 − 1.
    pub max: Option<Int>,
    /// Whether to wrap to `min` past `max` instead of failing `Exhausted`. Defaults to false.
    pub cycle: Option<bool>,
    /// A plain sequence's serial format (`"INV-{n:06}"`), written in the same insert and
    /// compared by `ensure`. Defaults to none; a striped sequence has none.
    pub format: Option<String>,
    /// Aborts the call (see `SignalOptions`).
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<Signal>,
}

/// Which names a listing holds: matching `matching`, after `after`, at most `limit`, among
/// `named`, the scopes of `scopesOf`; every name when left out.
#[napi(object)]
#[derive(Default)]
pub struct ListOptions {
    /// Name patterns (`*` any run of characters, `?` one). Defaults to every name.
    pub matching: Option<Vec<String>>,
    /// Names after this one (byte order). Defaults to the first.
    pub after: Option<String>,
    /// At most this many. Defaults to every one.
    pub limit: Option<u32>,
    /// Only these names (those that exist).
    pub named: Option<Vec<String>>,
    /// Only the scopes of this template (`list` only).
    pub scopes_of: Option<String>,
    /// Aborts the call (see `SignalOptions`).
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<Signal>,
}

/// A listing builder (`list`, `list_queues`, `list_gapless`) with `options` given, and the
/// template of `scopes_of` when there is one.
#[macro_export]
macro_rules! page {
    ($list:expr, $options:expr) => {{
        let mut list = $list;
        let o = $options.unwrap_or_default();
        if let Some(p) = o.matching {
            list = list.matching(p);
        }
        if let Some(a) = o.after {
            list = list.after(a);
        }
        if let Some(n) = o.limit {
            list = list.limit(usize::try_from(n).unwrap_or(usize::MAX));
        }
        if let Some(n) = o.named {
            list = list.named(n);
        }
        (list, o.scopes_of)
    }};
}

/// Which history entries to read.
#[napi(object)]
pub struct HistoryOptions {
    /// `"sequence"` (the default), `"gapless"` or `"queue"` (`Dispenser.history` only: a
    /// handle reads its own).
    pub kind: Option<String>,
    /// Only entries at or after this time: an RFC 3339 string (`date.toISOString()`).
    pub since: Option<String>,
    /// Only entries after this cursor (the last entry's `cursor`).
    pub after: Option<String>,
    /// At most this many entries (1 to 1000). Defaults to 100.
    pub limit: Option<u32>,
    /// Aborts the call (see `SignalOptions`).
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<Signal>,
}

/// How long and how hard `Dispenser.doctor` examines the server.
#[napi(object)]
pub struct DoctorInput {
    /// How many tasks write at once (2 to 64). Defaults to 8.
    pub tasks: Option<u32>,
    /// How many conditional increments each task sends. Defaults to 200.
    pub increments: Option<u32>,
    /// How many compare-and-set wins each task collects. Defaults to 100.
    pub swaps: Option<u32>,
    /// The longest the whole examination may take, in milliseconds. Defaults to 10 000.
    pub time_limit_ms: Option<f64>,
    /// Aborts the call (see `SignalOptions`).
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<Signal>,
}

/// The serial format of `input`, parsed (none when not given).
pub fn format(input: Option<&SpecInput>) -> napi::Result<Option<dispenser::Format>> {
    input
        .and_then(|i| i.format.as_deref())
        .map(dispenser::Format::parse)
        .transpose()
        .map_err(js)
}

/// The core's spec from its JavaScript form.
pub fn spec(input: Option<SpecInput>) -> napi::Result<Spec> {
    let Some(i) = input else {
        return Ok(Spec::default());
    };
    Ok(dispenser::translate::spec(
        opt_int("start", i.start)?,
        opt_int("step", i.step)?,
        opt_int("min", i.min)?,
        opt_int("max", i.max)?,
        i.cycle,
    ))
}

/// A listing's entries: each state, or in its place the error that kept it from being read.
pub fn listing(entries: Vec<dispenser::Result<dispenser::sequence::SequenceState>>) -> JsonList {
    JsonList(
        entries
            .into_iter()
            .map(|r| match r {
                Ok(s) => s.to_json(),
                Err(e) => error_json(&e),
            })
            .collect(),
    )
}

/// An error in the place of an entry of a listing.
pub fn error_json(e: &dispenser::Error) -> Value {
    let name = match e {
        dispenser::Error::CorruptDocument { name, .. } => Some(name.clone()),
        _ => None,
    };
    json!({ "name": name, "error": { "code": e.code(), "kind": crate::convert::kind(e.kind()), "message": e.to_string() } })
}

/// One collection of sequences on one MongoDB deployment. Cheap to share: every handle it
/// opens uses its connection pool.
#[napi]
pub struct Dispenser {
    pub(crate) inner: dispenser::Dispenser,
    /// `"bigint"` or `"number"` (`index.js` converts the answers).
    numbers: &'static str,
}

/// The `numbers` option: `"bigint"` (the default) or `"number"`.
fn numbers(given: Option<&str>) -> napi::Result<&'static str> {
    match given {
        None | Some("bigint") => Ok("bigint"),
        Some("number") => Ok("number"),
        Some(other) => Err(invalid(
            "numbers",
            format!(
                "{other:?}; give \"bigint\" (exact 64-bit integers, the default) or \"number\" (JavaScript numbers up to 2^53 - 1)"
            ),
        )),
    }
}

/// The `strategy` option: `"inc"` or `"cas"`.
fn strategy(name: &str) -> napi::Result<dispenser::sequence::Strategy> {
    match name {
        "inc" => Ok(dispenser::sequence::Strategy::ConditionalIncrement),
        "cas" => Ok(dispenser::sequence::Strategy::Cas),
        other => Err(invalid(
            "strategy",
            format!("{other:?}; give \"inc\" (the conditional increment, the default) or \"cas\""),
        )),
    }
}

#[napi]
impl Dispenser {
    /// Connects (lazily: nothing is sent until the first operation) to the deployment at
    /// `uri`. With `numbers: 'number'`, the dispenser and every handle it opens answer
    /// JavaScript numbers instead of bigints (see the guide).
    ///
    /// # Cancel safety
    ///
    /// Nothing to cancel: it sends nothing.
    #[napi(
        writable = true,
        configurable = true,
        ts_generic_types = "N extends Numbers = 'bigint'",
        ts_args_type = "uri: string, options?: ConnectOptions & { numbers?: N }",
        ts_return_type = "Promise<N extends 'number' ? AsNumbers<Dispenser> : Dispenser>"
    )]
    pub async fn connect(uri: String, options: Option<ConnectOptions>) -> napi::Result<Dispenser> {
        let mut o = Options::default();
        let numbers = numbers(options.as_ref().and_then(|c| c.numbers.as_deref()))?;
        if let Some(c) = options {
            if let Some(v) = c.database {
                o = o.with_database(v);
            }
            if let Some(v) = c.collection {
                o = o.with_collection(v);
            }
            if let Some(v) = c.caller {
                o = o.with_caller(v);
            }
            if let Some(v) = c.operation_timeout_ms {
                o = o.with_operation_timeout(millis("operationTimeoutMs", v)?);
            }
            if let Some(v) = c.coalesce {
                o = o.with_coalesce(v);
            }
            if let Some(v) = c.strategy {
                o = o.with_strategy(strategy(&v)?);
            }
        }
        let inner = dispenser::Dispenser::connect(&uri, o).await.map_err(js)?;
        Ok(Dispenser { inner, numbers })
    }

    /// The same dispenser acting as `caller`.
    #[napi]
    pub fn with_caller(&self, caller: String) -> napi::Result<Dispenser> {
        let inner = self.inner.with_caller(&caller).map_err(js)?;
        Ok(Dispenser {
            inner,
            numbers: self.numbers,
        })
    }

    /// What the integers it answers are: `"bigint"` or `"number"` (`connect`'s `numbers`).
    #[napi(getter, ts_return_type = "Numbers")]
    pub fn numbers(&self) -> String {
        self.numbers.to_owned()
    }

    /// Who this dispenser acts as; `null` for the unnamed caller.
    #[napi(getter)]
    pub fn caller(&self) -> Option<String> {
        self.inner.caller().map(str::to_owned)
    }

    /// The database holding the documents.
    #[napi(getter)]
    pub fn database(&self) -> String {
        self.inner.options().database.clone()
    }

    /// The collection holding the sequence documents.
    #[napi(getter)]
    pub fn collection(&self) -> String {
        self.inner.options().collection.clone()
    }

    /// Creates a new sequence; fails `AlreadyExists` when the name is taken.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn create<'env>(
        &self,
        env: &'env Env,
        name: String,
        spec: Option<SpecInput>,
    ) -> napi::Result<PromiseRaw<'env, Sequence>> {
        promise!(env, self.inner, |inner| {
            let format = format(spec.as_ref())?;
            let s = crate::dispenser::spec(spec)?;
            Ok(Sequence::from(inner.create(&name, s).format(format).await?))
        })
    }

    /// Creates the sequence, or opens it when everything a create writes is equal (start,
    /// step, bounds, cycle and `format`); fails `Conflict`, naming what differs, otherwise.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn ensure<'env>(
        &self,
        env: &'env Env,
        name: String,
        spec: Option<SpecInput>,
    ) -> napi::Result<PromiseRaw<'env, Sequence>> {
        promise!(env, self.inner, |inner| {
            let format = format(spec.as_ref())?;
            let s = crate::dispenser::spec(spec)?;
            Ok(Sequence::from(inner.ensure(&name, s).format(format).await?))
        })
    }

    /// Opens an existing sequence.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn open<'env>(
        &self,
        env: &'env Env,
        name: String,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, Sequence>> {
        promise!(env, self.inner, |inner| {
            Ok(Sequence::from(inner.open(&name).await?))
        })
    }

    /// Reads a sequence's stored state.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<SequenceState>")]
    pub fn peek<'env>(
        &self,
        env: &'env Env,
        name: String,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            Ok(Json(inner.peek(&name).await?.to_json()))
        })
    }

    /// The sequences, by name, or a page of them (`options`).
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Array<SequenceState | ListingError>>")]
    pub fn list<'env>(
        &self,
        env: &'env Env,
        options: Option<ListOptions>,
    ) -> napi::Result<PromiseRaw<'env, JsonList>> {
        promise!(env, self.inner, |inner| {
            let (mut list, scopes_of) = crate::page!(inner.list(), options);
            if let Some(t) = scopes_of {
                list = list.scopes_of(t);
            }
            Ok(listing(list.await?))
        })
    }

    /// Deletes a sequence by name (also one whose document no longer decodes).
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
        name: String,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        promise!(env, self.inner, |inner| Ok(inner.delete(&name).await?))
    }

    /// Checks that the server answers.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn ping<'env>(
        &self,
        env: &'env Env,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        promise!(env, self.inner, |inner| Ok(inner.ping().await?))
    }

    /// Examines the server: does it keep the guarantees the library relies on?
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<DoctorReport>")]
    pub fn doctor<'env>(
        &self,
        env: &'env Env,
        options: Option<DoctorInput>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let mut o = dispenser::doctor::DoctorOptions::default();
            if let Some(i) = options {
                if let Some(v) = i.tasks {
                    o = o.with_tasks(v);
                }
                if let Some(v) = i.increments {
                    o = o.with_increments(v);
                }
                if let Some(v) = i.swaps {
                    o = o.with_swaps(v);
                }
                if let Some(v) = i.time_limit_ms {
                    o = o.with_time_limit(millis("timeLimitMs", v)?);
                }
            }
            Ok(Json(inner.doctor().options(o).await?.to_json()))
        })
    }

    /// The history of the admin operations on a sequence (its stripes included), a gap-free
    /// sequence or a queue.
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
        name: String,
        options: Option<HistoryOptions>,
    ) -> napi::Result<PromiseRaw<'env, JsonList>> {
        let kind = match options.as_ref().and_then(|o| o.kind.as_deref()) {
            None | Some("sequence") => dispenser::error::Kind::Sequence,
            Some("queue") => dispenser::error::Kind::Queue,
            Some("gapless") => dispenser::error::Kind::Gapless,
            Some(other) => {
                return Err(invalid(
                    "history kind",
                    format!("{other:?}; give \"sequence\", \"gapless\" or \"queue\""),
                ));
            }
        };
        promise!(env, self.inner, |inner| history_read(
            inner.history(kind, &name),
            options
        )
        .await)
    }
}

/// A history read with `options` (their `kind` aside): the entries, oldest first. Every
/// handle's `history()` and `Dispenser.history()` answer through it.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn history_read(
    mut h: dispenser::history::History,
    options: Option<HistoryOptions>,
) -> Answer<JsonList> {
    if let Some(o) = options {
        if let Some(since) = o.since {
            let t: dispenser::jiff::Timestamp = since
                .parse()
                .map_err(|e| invalid("history since", format!("{since:?}: {e}")))?;
            h = h.since(t);
        }
        if let Some(after) = o.after {
            h = h.after(after);
        }
        if let Some(limit) = o.limit {
            h = h.limit(usize::try_from(limit).unwrap_or(usize::MAX));
        }
    }
    let entries = h.await?;
    Ok(JsonList(entries.iter().map(|e| e.to_json()).collect()))
}
