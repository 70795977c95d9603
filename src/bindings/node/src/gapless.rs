//! Gap-free sequences: a number is used exactly when the business write carrying it succeeds.
//! The business write is JavaScript (the application's own driver or Mongoose): the core
//! calls it through a threadsafe function and awaits its Promise.

use std::sync::Arc;

use dispenser::gapless::{AuditOptions, GaplessAlter, GaplessOptions};
use dispenser::mongodb::bson::doc;
use dispenser::mongodb::error::{ErrorKind, WriteError, WriteFailure};
use napi::Env;
use napi::Status;
use napi::bindgen_prelude::PromiseRaw;
use napi::bindgen_prelude::{Promise, i64n};
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use serde_json::json;

use crate::abort::{Signal, SignalOptions};
use crate::convert::{ForceOptions, Int, Json, JsonList, forced, int, opt_int, seconds};
use crate::dispenser::history_read;
use crate::dispenser::{Dispenser, ListOptions, error_json};
use crate::promise::promise;
use crate::sequence::stats_json;

/// What `Gapless.alter` changes; fields left out stay as they are.
#[napi(object)]
pub struct GaplessAlterInput {
    /// The longest lease, in seconds (a fraction allowed; 1 ms to a day).
    pub max_lease_seconds: Option<f64>,
}

/// Where a gap-free sequence's numbers are carried and how long a holder may keep one.
#[napi(object)]
pub struct GaplessOptionsInput {
    /// The business collection (in the dispenser's database) whose documents carry the numbers.
    pub collection: String,
    /// The field of those documents that carries the number (dots for a nested field).
    pub field: String,
    /// The first number. Defaults to 1.
    pub start: Option<Int>,
    /// How long a caller's lease on a number lasts, in seconds (a fraction allowed).
    pub lease_seconds: Option<f64>,
    /// The longest lease any caller may take, in seconds.
    pub max_lease_seconds: Option<f64>,
    /// How long a call waits for other holders, in seconds.
    pub wait_seconds: Option<f64>,
    /// The field marking void documents. Defaults to `voided`.
    pub void_field: Option<String>,
    /// More fields written into every void document (`{ status: "VOID", total: 0 }`): JSON
    /// values. Defaults to none.
    #[napi(ts_type = "Record<string, unknown>")]
    pub void_extra: Option<serde_json::Value>,
    /// Aborts the call (see `SignalOptions`).
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<Signal>,
}

/// What one run of the business write came to, as the JavaScript wrapper reports it.
#[napi(object)]
pub struct WriteOutcome {
    /// Whether the write succeeded.
    pub ok: bool,
    /// The error's numeric `code` (11000: a duplicate key), when it has one.
    pub code: Option<f64>,
    /// The error's message.
    pub message: Option<String>,
}

/// The number a successful business write carries, and how many numbers the call found used
/// or voided and moved past.
#[napi(object, object_from_js = false)]
pub struct IssuedNumber {
    /// The number used.
    pub number: i64n,
    /// Numbers moved past (already used or voided).
    pub skipped: u32,
}

/// Which numbers an audit checks.
#[napi(object)]
pub struct AuditInput {
    /// The first number expected. Defaults to the smallest found.
    pub from: Option<Int>,
    /// Aborts the call (see `SignalOptions`).
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<Signal>,
}

fn options(input: GaplessOptionsInput) -> napi::Result<GaplessOptions> {
    let start = opt_int("start", input.start)?;
    let extra = input
        .void_extra
        .map(|v| crate::adopt::document("voidExtra", v))
        .transpose()?;
    let durations = dispenser::translate::GaplessSeconds {
        lease: input.lease_seconds.map(|s| ("leaseSeconds", s)),
        max_lease: input.max_lease_seconds.map(|s| ("maxLeaseSeconds", s)),
        wait: input.wait_seconds.map(|s| ("waitSeconds", s)),
    };
    dispenser::translate::gapless_options(
        &input.collection,
        &input.field,
        start,
        durations,
        input.void_field.as_deref(),
        extra,
    )
    .map_err(crate::convert::js)
}

#[napi]
impl Dispenser {
    /// Makes the gap-free sequence `name`, or opens it when it exists with the same settings;
    /// makes sure the business collection has a unique index on the field.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn ensure_gapless<'env>(
        &self,
        env: &'env Env,
        name: String,
        options: GaplessOptionsInput,
    ) -> napi::Result<PromiseRaw<'env, Gapless>> {
        promise!(env, self.inner, |inner| {
            let o = crate::gapless::options(options)?;
            let inner = inner.ensure_gapless(&name, o).await?;
            Ok(Gapless { inner })
        })
    }

    /// Makes the gap-free sequence `name`; fails `AlreadyExists` when it exists.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn create_gapless<'env>(
        &self,
        env: &'env Env,
        name: String,
        options: GaplessOptionsInput,
    ) -> napi::Result<PromiseRaw<'env, Gapless>> {
        promise!(env, self.inner, |inner| {
            let o = crate::gapless::options(options)?;
            let inner = inner.create_gapless(&name, o).await?;
            Ok(Gapless { inner })
        })
    }

    /// Deletes the gap-free sequence `name` (its state; the business collection and its
    /// documents stay); refused (a ConflictError, code `lease_held`) while a holder's lease
    /// runs, unless `{ force: true }` (recorded in the history).
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn delete_gapless<'env>(
        &self,
        env: &'env Env,
        name: String,
        options: Option<ForceOptions>,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        let force = forced(options);
        promise!(env, self.inner, |inner| {
            Ok(inner.delete_gapless(&name).force(force).await?)
        })
    }

    /// Opens the existing gap-free sequence `name` with the settings it was created with.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn open_gapless<'env>(
        &self,
        env: &'env Env,
        name: String,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, Gapless>> {
        promise!(env, self.inner, |inner| {
            let inner = inner.open_gapless(&name).await?;
            Ok(Gapless { inner })
        })
    }

    /// One page of the gap-free sequences' states, by name (one whose document cannot be
    /// read as `{ name, error }` in its place).
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Array<GaplessState | ListingError>>")]
    pub fn list_gapless<'env>(
        &self,
        env: &'env Env,
        options: Option<ListOptions>,
    ) -> napi::Result<PromiseRaw<'env, JsonList>> {
        promise!(env, self.inner, |inner| {
            let (list, _) = crate::page!(inner.list_gapless(), options);
            Ok(JsonList(
                list.await?
                    .into_iter()
                    .map(|r| match r {
                        Ok(s) => s.to_json(),
                        Err(e) => error_json(&e),
                    })
                    .collect(),
            ))
        })
    }
}

/// A gap-free sequence.
#[napi]
pub struct Gapless {
    inner: dispenser::gapless::Gapless,
}

/// The business write's failure as the core reads it: a duplicate key (code 11000) as the
/// driver's own duplicate-key error, so the core moves on to the next number; anything else as
/// its message.
fn failure(outcome: WriteOutcome) -> Box<dyn std::error::Error + Send + Sync> {
    let message = outcome
        .message
        .unwrap_or_else(|| "the business write failed".to_owned());
    if outcome.code == Some(11000.0) {
        let w: Result<WriteError, _> = dispenser::mongodb::bson::from_document(doc! {
            "code": 11000, "codeName": "DuplicateKey", "errmsg": &message,
        });
        if let Ok(w) = w {
            let e = dispenser::mongodb::error::Error::from(ErrorKind::Write(
                WriteFailure::WriteError(w),
            ));
            return Box::new(e);
        }
    }
    message.into()
}

#[napi]
impl Gapless {
    /// The sequence's name.
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

    /// The business collection whose documents carry the numbers.
    #[napi(getter)]
    pub fn collection(&self) -> String {
        self.inner.options().collection.clone()
    }

    /// The field that carries the number.
    #[napi(getter)]
    pub fn field(&self) -> String {
        self.inner.options().field.clone()
    }

    /// The field marking void documents.
    #[napi(getter)]
    pub fn void_field(&self) -> String {
        self.inner.options().void_field.clone()
    }

    /// `Gapless.issue` without its JavaScript half: `write(n)` resolves to the outcome of the
    /// business write (the wrapper catches its error) rather than rejecting.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(js_name = "_issue")]
    pub fn issue_outcome<'env>(
        &self,
        env: &'env Env,
        write: ThreadsafeFunction<i64n, Promise<WriteOutcome>, i64n, Status, false>,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, IssuedNumber>> {
        promise!(env, self.inner, |inner| {
            let write = Arc::new(write);
            let issued = inner
                .issue(|n| {
                    let write = write.clone();
                    async move {
                        let called = write.call_async(i64n(n)).await;
                        let outcome = match called {
                            Ok(promise) => promise.await,
                            Err(e) => Err(e),
                        };
                        match outcome {
                            Ok(o) if o.ok => Ok(()),
                            Ok(o) => Err(failure(o)),
                            Err(e) => Err(failure(WriteOutcome {
                                ok: false,
                                code: None,
                                message: Some(e.reason),
                            })),
                        }
                    }
                })
                .await?;
            Ok(IssuedNumber {
                number: i64n(issued.number),
                skipped: issued.skipped,
            })
        })
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

    /// The state: the next number, the lease, the voided numbers.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<GaplessState>")]
    pub fn peek<'env>(
        &self,
        env: &'env Env,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            Ok(Json(inner.peek().await?.to_json()))
        })
    }

    /// Confirms at once the last number this handle used.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn flush<'env>(
        &self,
        env: &'env Env,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        promise!(env, self.inner, |inner| Ok(inner.flush().await?))
    }

    /// Changes the sequence's settings (`maxLeaseSeconds`: the longest lease); resolves to
    /// the state afterwards.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<GaplessState>")]
    pub fn alter<'env>(
        &self,
        env: &'env Env,
        change: GaplessAlterInput,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let mut a = GaplessAlter::default();
            if let Some(s) = change.max_lease_seconds {
                a = a.with_max_lease(seconds("maxLeaseSeconds", s)?);
            }
            Ok(Json(inner.alter(a).await?.to_json()))
        })
    }

    /// Voids the next number on purpose, with a reason.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn void<'env>(
        &self,
        env: &'env Env,
        number: Int,
        reason: String,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        promise!(env, self.inner, |inner| {
            let n = int("number", number)?;
            Ok(inner.void(n, &reason).await?)
        })
    }

    /// Ends a holder's lease on `number`: voided if it was not written, else moved past.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Released>")]
    pub fn release<'env>(
        &self,
        env: &'env Env,
        number: Int,
        reason: String,
        options: Option<ForceOptions>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let n = int("number", number)?;
            let r = inner.release(n, reason).force(forced(options)).await?;
            Ok(Json(r.to_json()))
        })
    }

    /// Deletes this gap-free sequence (its state; the business collection and its documents
    /// stay); refused (a ConflictError, code `lease_held`) while a holder's lease runs, unless
    /// `{ force: true }` (recorded in the history).
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

    /// Checks the business collection: every number from `from` used or voided exactly once.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Audit>")]
    pub fn audit<'env>(
        &self,
        env: &'env Env,
        options: Option<AuditInput>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let mut o = AuditOptions::default().with_void_field(inner.options().void_field.clone());
            if let Some(from) = opt_int("from", options.and_then(|o| o.from))? {
                o = o.with_from(from);
            }
            let field = &inner.options().field;
            let a = dispenser::gapless::audit(inner.business(), field, &o).await?;
            Ok(Json(json!({
                "clean": a.is_clean(), "numbers": a.numbers, "first": a.first, "last": a.last,
                "missing": a.missing, "gaps": a.gaps, "duplicated": a.duplicated,
                "duplicates": a.duplicates, "not_integer": a.not_integer, "voided": a.voided,
                "voids": a.voids, "malformed": a.malformed, "malformed_docs": a.malformed_docs,
            })))
        })
    }

    /// What this handle did so far.
    #[napi(ts_return_type = "Stats")]
    pub fn stats(&self) -> Json {
        Json(stats_json(&self.inner.stats()))
    }
}
