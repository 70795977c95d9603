//! The entry points: a [`Dispenser`] (one collection of sequences, with admin operations) and
//! the [`Sequence`] handles it opens (where numbers are drawn).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongodb::Client;
use mongodb::options::ClientOptions;

use crate::arith::{self, Run};
use crate::coalesce::{self, Combiner};
use crate::document::{Origin, SequenceState, Stored, StripeId};
use crate::error::ErrorKind;
use crate::error::Kind;
use crate::error::{Differs, Error, Result, shown_or_none};
use crate::format::Format;
use crate::history::Subject;
use crate::history::record::{Recorder, sequence_state};
use crate::history::subject::Target;
use crate::options::Options;
use crate::redact;
use crate::spec::{Reset, Spec, validate_name, validate_plain_name};
use crate::stats::{Counters, Stats};
use crate::store::Store;
use crate::strategy::{Adaptive, Decision, Drawer};

/// One collection of sequences on one MongoDB deployment.
///
/// Cheap to clone (it shares the driver's connection pool).
///
/// # Example
///
/// ```no_run
/// use dispenser::{Dispenser, Options, Spec};
///
/// # async fn f() -> dispenser::Result<()> {
/// let dispenser = Dispenser::connect("mongodb://127.0.0.1:27017", Options::default()).await?;
/// let orders = dispenser.ensure("orders", Spec::default()).await?;
/// let id = orders.next().await?;
/// println!("order {id}");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Dispenser {
    store: Store,
    options: Arc<Options>,
}

impl Dispenser {
    /// A dispenser over an existing driver client.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when the options are invalid (see [`Options::validate`]).
    pub fn new(client: &Client, options: Options) -> Result<Self> {
        options.validate()?;
        Ok(Dispenser {
            store: Store::new(client, &options),
            options: Arc::new(options),
        })
    }

    /// Parses `uri`, builds a driver client whose server selection and connect timeouts
    /// default to 90 % of the operation timeout (unless the URI sets them), and wraps it.
    ///
    /// Nothing is sent to the server yet; an unreachable server is reported by the first
    /// operation as [`Error::Database`] after the server selection timeout.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an invalid URI or invalid options. The message never
    /// contains the URI's password.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it writes nothing and sends nothing to the server (a `mongodb+srv` URI is
    /// first resolved through DNS; dropping the future stops that).
    pub async fn connect(uri: &str, options: Options) -> Result<Self> {
        options.validate()?;
        let client_options = client_options(uri, options.operation_timeout).await?;
        let client =
            Client::with_options(client_options).map_err(|e| redact::invalid_uri(uri, &e))?;
        Dispenser::new(&client, options)
    }

    /// The options this dispenser was built with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The same dispenser (the same connection pool and options) acting as `caller`: the
    /// name its queue takes scope their request ids to (see [`Options::caller`]). Cheap: the
    /// service makes one per request, named after the request's token.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] unless `caller` is 1 to 128 printable ASCII characters.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let kiosk = d.with_caller("kiosk-3")?;
    /// assert_eq!(kiosk.caller(), Some("kiosk-3"));
    /// # Ok(()) }
    /// ```
    pub fn with_caller(&self, caller: &str) -> Result<Dispenser> {
        crate::options::check_caller(caller)?;
        let mut options = (*self.options).clone();
        options.caller = Some(caller.to_owned());
        Ok(Dispenser {
            store: self.store.clone(),
            options: Arc::new(options),
        })
    }

    /// Who this dispenser acts as ([`Options::caller`]); `None` for the unnamed caller.
    pub fn caller(&self) -> Option<&str> {
        self.options.caller.as_deref()
    }

    /// The history of this dispenser's collections, written as its caller.
    pub(crate) fn recorder(&self) -> Recorder {
        Recorder::new(&self.store, self.caller())
    }

    /// The driver client this dispenser talks through (its connection pool), to reach other
    /// collections of the deployment without a second pool.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let names = d.client().database("dispenser").list_collection_names().await;
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> &Client {
        self.store.collection().client()
    }

    /// [`Dispenser::create`] once its options are set: the format, if any, written in the
    /// same insert.
    pub(crate) async fn create_now(
        &self,
        name: &str,
        spec: Spec,
        format: Option<Format>,
    ) -> Result<Sequence> {
        validate_plain_name(name)?;
        spec.validate(name)?;
        self.refuse_if_striped(name).await?;
        // A name taken is refused before anything is written, history included (a document
        // that does not decode takes its name too).
        match self.store.load(name).await {
            Ok(None) => {}
            Ok(Some(_)) | Err(Error::CorruptDocument { .. }) => {
                return Err(Error::AlreadyExists {
                    kind: crate::Kind::Sequence,
                    name: name.to_owned(),
                });
            }
            Err(e) => return Err(e),
        }
        let sequence = self
            .recorder()
            .run(
                &Target::sequence(name),
                "create",
                spec_params(&spec, format.as_ref()),
                None,
                async {
                    match self
                        .store
                        .insert_with(name, &spec, None, format.as_ref())
                        .await?
                    {
                        Some(incarnation) => {
                            Ok(self.handle(name, created(&spec, None, incarnation)))
                        }
                        None => Err(Error::AlreadyExists {
                            kind: crate::Kind::Sequence,
                            name: name.to_owned(),
                        }),
                    }
                },
                |_| Some(sequence_state(&fresh_state(name, &spec, format.as_ref()))),
            )
            .await?;
        Ok(sequence)
    }

    /// [`Dispenser::ensure`] once its options are set.
    pub(crate) async fn ensure_now(
        &self,
        name: &str,
        spec: Spec,
        format: Option<Format>,
    ) -> Result<Sequence> {
        validate_plain_name(name)?;
        spec.validate(name)?;
        self.refuse_if_striped(name).await?;
        self.ensure_recorded(name, spec, format.as_ref(), true, false)
            .await
    }

    /// Opens the sequence or scope `name` (already validated) when it exists, comparing its
    /// shape with `spec` (and, when `whole`, its start and format: a scope takes both from
    /// its template), or with `new_only` refuses it: nothing written either way. Else creates
    /// it with `spec` and `format`, recorded: the intent before the insert, the outcome after
    /// (`refused` when another client created it between the look and the insert; the
    /// sequence it made is opened all the same unless `new_only`).
    pub(crate) async fn ensure_recorded(
        &self,
        name: &str,
        spec: Spec,
        format: Option<&Format>,
        whole: bool,
        new_only: bool,
    ) -> Result<Sequence> {
        let exists = || Error::AlreadyExists {
            kind: kind_of(name),
            name: name.to_owned(),
        };
        // Opening an existing sequence changes nothing: only a creation is recorded.
        if let Some((stored, stored_format)) = self.store.load_with_format(name).await? {
            if new_only {
                return Err(exists());
            }
            let asked = Asked {
                spec: &spec,
                format,
                stripe: None,
                whole,
            };
            return self.open_as(name, &asked, stored, stored_format.as_ref());
        }
        let recorder = self.recorder();
        let entry = recorder
            .begin(
                &Target::sequence(name),
                "create",
                spec_params(&spec, format),
                None,
            )
            .await?;
        let made = self.insert_or_load(name, spec, format, None, whole).await;
        let (recorded, after) = match &made {
            Ok((_, true)) => (
                Ok(()),
                Some(sequence_state(&fresh_state(name, &spec, format))),
            ),
            // Another client created it between the look and the insert.
            Ok((_, false)) => (Err(exists()), None),
            Err(e) => (Err(e.clone()), None),
        };
        entry.end(&recorded, after).await;
        match made? {
            (sequence, true) => Ok(sequence),
            (sequence, false) if !new_only => Ok(sequence),
            (_, false) => Err(exists()),
        }
    }

    /// A plain sequence and a striped one must not share a name (`ids` and `ids~0 …`): both
    /// would start at the same numbers.
    async fn refuse_if_striped(&self, name: &str) -> Result<()> {
        let stripe0 = crate::spec::stripe_name(name, 0);
        match self.store.load(&stripe0).await? {
            Some(s) if s.origin.stripe.is_some() => {
                let mut d = Differs::default();
                d.field(
                    "layout",
                    format!("striped ({stripe0} …)"),
                    "plain".to_owned(),
                );
                d.check(Kind::Sequence, name).map(drop)
            }
            _ => Ok(()),
        }
    }

    /// [`Dispenser::ensure`] for a name and spec already validated: `stripe` is what the
    /// document must be (checked when it exists), `check_start` whether a recorded start
    /// must equal `spec.start`; no format (a stripe has none).
    pub(crate) async fn ensure_as(
        &self,
        name: &str,
        spec: Spec,
        stripe: Option<StripeId>,
        check_start: bool,
    ) -> Result<Sequence> {
        self.insert_or_load(name, spec, None, stripe, check_start)
            .await
            .map(|(sequence, _)| sequence)
    }

    /// [`Dispenser::ensure_as`] with `format`, and whether this call inserted the document.
    pub(crate) async fn insert_or_load(
        &self,
        name: &str,
        spec: Spec,
        format: Option<&Format>,
        stripe: Option<StripeId>,
        whole: bool,
    ) -> Result<(Sequence, bool)> {
        if let Some(incarnation) = self.store.insert_with(name, &spec, stripe, format).await? {
            return Ok((self.handle(name, created(&spec, stripe, incarnation)), true));
        }
        let (stored, stored_format) = self
            .store
            .load_with_format(name)
            .await?
            .ok_or_else(|| no_such(name))?;
        let asked = Asked {
            spec: &spec,
            format,
            stripe,
            whole,
        };
        self.open_as(name, &asked, stored, stored_format.as_ref())
            .map(|sequence| (sequence, false))
    }

    /// The handle on the stored sequence `stored` (with the format `stored_format`), if it
    /// is what was `asked` for.
    fn open_as(
        &self,
        name: &str,
        asked: &Asked<'_>,
        stored: Stored,
        stored_format: Option<&Format>,
    ) -> Result<Sequence> {
        let altered = differences(&stored, stored_format, asked).check(kind_of(name), name)?;
        let mut handle = self.handle(name, stored);
        handle.altered = altered.into();
        Ok(handle)
    }

    /// Opens an existing sequence.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], [`Error::InvalidName`], [`Error::CorruptDocument`],
    /// [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn open(&self, name: &str) -> Result<Sequence> {
        validate_name(name)?;
        let stored = self.load(name).await?;
        Ok(self.handle(name, stored))
    }

    /// Reads the stored state of a sequence without changing it.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], [`Error::InvalidName`], [`Error::CorruptDocument`],
    /// [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn peek(&self, name: &str) -> Result<SequenceState> {
        validate_name(name)?;
        self.store
            .load_state(name)
            .await?
            .ok_or_else(|| no_such(name))
    }

    /// [`Sequence::reset`] by name.
    pub(crate) async fn reset(&self, name: &str, reset: Reset) -> Result<SequenceState> {
        let Reset { next, force } = reset;
        let before = self.peek(name).await?;
        let params = bson::doc! { "next": next, "force": force };
        // Bad input is refused before anything is written; a refusal of the state (a reset
        // backwards without force) is recorded, intent and outcome `refused`.
        if let Err(e) = reset_decision(name, next, force)(&before.stored()) {
            if e.kind() != ErrorKind::Conflict {
                return Err(e);
            }
            let state = Some(sequence_state(&before));
            let recorder = self.recorder();
            return Err(recorder
                .refused(&Target::sequence(name), "reset", params, state, e)
                .await);
        }
        self.recorder()
            .run(
                &Target::sequence(name),
                "reset",
                params,
                Some(sequence_state(&before)),
                self.set_value(name, reset_decision(name, next, force)),
                |s| Some(sequence_state(s)),
            )
            .await
    }

    /// Deletes the sequence `name`, like [`Sequence::delete`], without opening it first: the
    /// way to delete one whose document no longer decodes (no handle opens on it). Its
    /// numbers may be issued again if it is created anew.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], [`Error::InvalidName`], [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave the sequence deleted or not (see
    /// [`Dispenser::peek`]) and its history entry `pending` (see [`history`](crate::history));
    /// it issues no number.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// d.delete("old-orders").await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self, name: &str) -> Result<()> {
        validate_name(name)?;
        // A document that does not decode can still be deleted (its state is not recorded).
        let before = match self.peek(name).await {
            Ok(state) => Some(sequence_state(&state)),
            Err(Error::CorruptDocument { .. }) => None,
            Err(e) => return Err(e),
        };
        self.recorder()
            .run(
                &Target::sequence(name),
                "delete",
                bson::Document::new(),
                before,
                async {
                    if self.store.delete(name).await? {
                        Ok(())
                    } else {
                        Err(no_such(name))
                    }
                },
                |()| None,
            )
            .await
    }

    /// Checks that the server answers (a `ping` command), within the operation timeout.
    ///
    /// # Errors
    ///
    /// [`Error::Database`] or [`Error::Timeout`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it writes nothing.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// d.ping().await?; // the database is reachable
    /// # Ok(()) }
    /// ```
    pub async fn ping(&self) -> Result<()> {
        self.store.ping().await
    }

    /// Waits for the writes that dropped handles left running in the background — a handle
    /// that goes away adds the numbers it issued to its sequence's usage counters in a write
    /// of its own — at most the operation timeout; those still running then are abandoned
    /// (a usage count is lost, never a number). Call it before the runtime shuts down: a
    /// runtime that shuts down under such a write can make the driver panic in its task.
    /// It waits for the writes of every dispenser of the process, not only this one's.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped, the writes it waited for go on running in the background.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let n = d.open("orders").await?.next().await?;
    /// println!("{n}");
    /// d.flush().await; // the handle is gone: let its count land before the program ends
    /// # Ok(()) }
    /// ```
    pub async fn flush(&self) {
        crate::strategy::wait_left_running(self.store.timeout()).await;
    }

    /// The history of `name`, a `kind` (see [`History`](crate::history::History) for the
    /// options: `.since(t)`, `.after(cursor)`, `.limit(n)`): what the handles' `history()`
    /// reads, for what no handle opens — a deleted sequence, queue or gap-free sequence. A
    /// sequence's name says whether it is a plain or striped sequence, a stripe `ids~3` or
    /// a scope `t@k`.
    ///
    /// # Errors
    ///
    /// See [`History`](crate::history::History).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::Kind;
    /// let last_day = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24);
    /// for e in d.history(Kind::Queue, "lobby").since(last_day).await? {
    ///     println!("{}", e.to_json());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn history(&self, kind: Kind, name: &str) -> crate::history::History {
        let subject = match kind {
            Kind::Gapless => Subject::Gapless,
            Kind::Queue => Subject::Queue,
            _ => Subject::Sequence,
        };
        self.recorder().history(subject, name)
    }

    /// The store (for the scope and block layers).
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// [`Sequence::advance_to`] by name.
    pub(crate) async fn advance_to(&self, name: &str, n: i64) -> Result<SequenceState> {
        self.advance_recorded(name, n, "advance-to", bson::doc! { "to": n })
            .await
    }

    /// Moves `name` past `n` as [`Sequence::advance_to`] does, recorded as the operation `op`
    /// with `params` (advance-to, adopt).
    pub(crate) async fn advance_recorded(
        &self,
        name: &str,
        n: i64,
        op: &str,
        params: bson::Document,
    ) -> Result<SequenceState> {
        // Refused by the state, or nothing to move: nothing is written, history included.
        let before = self.peek(name).await?;
        if advance_decision(name, n)(&before.stored())?.is_none() {
            return Ok(before);
        }
        self.recorder()
            .run(
                &Target::sequence(name),
                op,
                params,
                Some(sequence_state(&before)),
                self.set_value(name, advance_decision(name, n)),
                |s| Some(sequence_state(s)),
            )
            .await
    }

    /// Moves `value` by the compare-and-set loop (the draws' own, [`Drawer::update`]), from
    /// a fresh read: `decide` looks at the stored state and returns the value to
    /// store, `None` to leave it as it is, or an error (nothing written). Returns the state
    /// afterwards.
    async fn set_value(
        &self,
        name: &str,
        decide: impl Fn(&Stored) -> Result<Option<i64>>,
    ) -> Result<SequenceState> {
        validate_name(name)?;
        // `open` has just read the state: the loop starts from it (no second read).
        let handle = self.open(name).await?;
        let (_, written) = handle
            .drawer()
            .update(true, None, |stored, _| {
                Ok(match decide(stored)? {
                    Some(value) => Decision::Write {
                        value,
                        wrapped: false,
                        shape: None,
                        issued: 0,
                        then: (),
                    },
                    None => Decision::Done(()),
                })
            })
            .await?;
        let read = self.peek(name).await;
        match written {
            Some(_) => read.map_err(|e| e.after_write(&format!("sequence {name:?} changed"))),
            None => read,
        }
    }

    async fn load(&self, name: &str) -> Result<Stored> {
        self.store.load(name).await?.ok_or_else(|| no_such(name))
    }

    fn handle(&self, name: &str, stored: Stored) -> Sequence {
        Sequence {
            drawer: Arc::new(Drawer {
                name: name.to_owned(),
                store: self.store.clone(),
                strategy: self.options.strategy,
                backoff: self.options.backoff,
                remembered: Mutex::new(stored),
                adaptive: Mutex::new(Adaptive::new(self.options.cas_mode, self.options.strategy)),
                stats: Counters::default(),
                coalesce: self.options.coalesce,
                increment_retry: self.options.increment_retry,
                usage: Mutex::default(),
            }),
            combiner: Arc::default(),
            dispenser: self.clone(),
            altered: Arc::default(),
        }
    }
}

/// What a reset of `name` to `next` writes on the state `stored`: the new value, or why it
/// is refused.
fn reset_decision(
    name: &str,
    next: i64,
    force: bool,
) -> impl Fn(&Stored) -> Result<Option<i64>> + '_ {
    move |stored| {
        let spec = stored.spec;
        if next < spec.min || next > spec.max {
            return Err(Error::invalid_argument(
                "reset value",
                format!(
                    "{next} lies outside the bounds {}..={} of sequence {name:?}",
                    spec.min, spec.max
                ),
            ));
        }
        let new_value = next.checked_sub(spec.step).ok_or_else(|| {
            Error::invalid_argument(
                "reset value",
                format!(
                    "{next} - step {} does not fit in a 64-bit integer",
                    spec.step
                ),
            )
        })?;
        if stored.origin.stripe.is_some() && !arith::in_class(spec.step, stored.value, next) {
            return Err(Error::invalid_argument(
                "reset value",
                format!(
                    "{next} is not a number of stripe {name:?} (its numbers are {} + k·{}); \
                     reset the striped sequence as a whole (StripedSequence::reset, or `dispenser reset` with its name), which moves \
                     each stripe within its own class",
                    i128::from(stored.value) + i128::from(spec.step),
                    spec.step
                ),
            ));
        }
        let backwards = if spec.step > 0 {
            new_value < stored.value
        } else {
            new_value > stored.value
        };
        if backwards && !force {
            return Err(Error::WouldGoBackwards {
                name: name.to_owned(),
                current: stored.value,
                requested: next,
            });
        }
        Ok(Some(new_value))
    }
}

/// What an advance of `name` past `n` writes on the state `stored`: the new value, `None`
/// when it is past already, or why it is refused.
fn advance_decision(name: &str, n: i64) -> impl Fn(&Stored) -> Result<Option<i64>> + '_ {
    move |stored| {
        let spec = stored.spec;
        if n < spec.min || n > spec.max {
            return Err(Error::invalid_argument(
                "advance-to value",
                format!(
                    "{n} lies outside the bounds {}..={} of sequence {name:?}",
                    spec.min, spec.max
                ),
            ));
        }
        // Stay in the sequence's own residue class (a stripe in its own).
        let target = arith::advance_value(spec.step, stored.value, n);
        let ahead = if spec.step > 0 {
            target > stored.value
        } else {
            target < stored.value
        };
        Ok(ahead.then_some(target))
    }
}

fn no_such(name: &str) -> Error {
    Error::NotFound {
        kind: kind_of(name),
        name: name.to_owned(),
    }
}

/// A spec (and format) as the history records the parameters of a create.
fn spec_params(spec: &Spec, format: Option<&Format>) -> bson::Document {
    let mut params = bson::doc! {
        "start": spec.start, "step": spec.step, "min": spec.min, "max": spec.max, "cycle": spec.cycle,
    };
    if let Some(f) = format {
        params.insert("format", f.as_str());
    }
    params
}

/// The state of a sequence `name` just created from `spec`, as the history shows it.
fn fresh_state(name: &str, spec: &Spec, format: Option<&Format>) -> SequenceState {
    let now = bson::DateTime::now();
    SequenceState {
        name: name.to_owned(),
        value: spec.start.saturating_sub(spec.step),
        step: spec.step,
        min: spec.min,
        max: spec.max,
        cycle: spec.cycle,
        version: 0,
        cycles: 0,
        created_at: now,
        updated_at: now,
        format: format.cloned(),
        start: Some(spec.start),
        stripe: None,
        incarnation: None,
        issued_by_day: Vec::new(),
    }
}

/// The state of a sequence just inserted from `spec`.
fn created(spec: &Spec, stripe: Option<StripeId>, incarnation: bson::oid::ObjectId) -> Stored {
    Stored {
        spec: *spec,
        value: spec.start.saturating_sub(spec.step),
        version: 0,
        cycles: 0,
        incarnation: Some(incarnation),
        origin: Origin {
            start: Some(spec.start),
            stripe,
        },
    }
}

/// What an `ensure` of a sequence asks for: the spec, the format, the stripe, and whether
/// the start and format are compared (`whole`; a scope takes both from its template).
struct Asked<'a> {
    spec: &'a Spec,
    format: Option<&'a Format>,
    stripe: Option<StripeId>,
    whole: bool,
}

/// What differs between the stored sequence `stored` (with the format `stored_format`) and
/// the one `asked` for: its shape; its start (when `whole` and the document records one: a
/// sequence created by an earlier version is compared without it) and format (when
/// `whole`: asked none and stored one is a difference); and its stripe (a document from
/// before stripes were recorded is compared without it).
fn differences(stored: &Stored, stored_format: Option<&Format>, asked: &Asked<'_>) -> Differs {
    let mut d = Differs::default();
    let want = asked.spec;
    if let (true, Some(start)) = (asked.whole, stored.origin.start) {
        d.field("start", start, want.start);
    }
    // The shape and the format are what `alter` changes: kept, told. A stripe's step is its
    // striped sequence's layout, which nothing changes.
    let have = &stored.spec;
    if !have.same_shape(want) {
        if asked.stripe.is_some() {
            d.field("step", have.step, want.step);
        } else {
            d.alterable("step", have.step, want.step);
        }
        d.alterable("min", have.min, want.min)
            .alterable("max", have.max, want.max)
            .alterable("cycle", have.cycle, want.cycle);
    }
    if asked.whole {
        let shown = |f: Option<&Format>| shown_or_none(f.map(Format::as_str));
        d.alterable("format", shown(stored_format), shown(asked.format));
    }
    let shown = |s: Option<StripeId>| {
        s.map_or_else(
            || "none".to_owned(),
            |s| format!("{} of {}", s.index, s.count),
        )
    };
    match (stored.origin.stripe, asked.stripe) {
        (Some(h), w) if Some(h) != w => {
            d.field("stripe", shown(Some(h)), shown(w));
        }
        _ => {}
    }
    d
}

/// The kind a sequence's name says it is: a scope `t@k`, else a sequence (a stripe's
/// conflict is the striped sequence's, which says so).
fn kind_of(name: &str) -> Kind {
    match crate::spec::name_parts(name) {
        crate::spec::NameParts::Scope(..) => Kind::Scope,
        _ => Kind::Sequence,
    }
}

/// Driver options from a URI, with our timeouts where the URI sets none.
///
/// A `mongodb+srv://` URI is resolved through DNS here, bounded by `timeout` too: a lookup
/// that fails is [`Error::Database`], one that hangs is [`Error::Timeout`].
pub(crate) async fn client_options(uri: &str, timeout: Duration) -> Result<ClientOptions> {
    redact::check_credentials(uri)?;
    let shown = redact::redact_uri(uri);
    let parsed = tokio::time::timeout(timeout, ClientOptions::parse(uri))
        .await
        .map_err(|_| Error::Timeout {
            context: format!("resolving MongoDB URI {shown}"),
            after: timeout,
            written: crate::Written::Nothing,
        })?;
    let mut opts = parsed.map_err(|e| match e.kind.as_ref() {
        mongodb::error::ErrorKind::DnsResolve { .. } => {
            Error::database(format!("resolving MongoDB URI {shown}"), e)
        }
        _ => redact::invalid_uri(uri, &e),
    })?;
    // A little under the operation timeout, so that when no server can be reached the
    // driver's own error (which says why: "connection refused at HOST") arrives before the
    // operation's bound cuts it off with a bare timeout.
    let selection = timeout.mul_f64(0.9);
    opts.server_selection_timeout.get_or_insert(selection);
    opts.connect_timeout.get_or_insert(selection);
    opts.app_name.get_or_insert_with(|| "dispenser".to_owned());
    Ok(opts)
}

/// A handle on one sequence: draws numbers. Cheap to clone; clones share their remembered
/// state and [`Stats`], and any number of tasks may use one handle at once.
///
/// Every number returned was reserved by a write the server acknowledged with the configured
/// write concern; no number is ever returned twice, by this handle or any other.
#[derive(Clone)]
pub struct Sequence {
    drawer: Arc<Drawer>,
    /// The dispenser it was opened from (its caller names the admin operations' history).
    dispenser: Dispenser,
    /// The queue of callers waiting to share a write (see [`Options::coalesce`]).
    combiner: Arc<Combiner>,
    /// What the `ensure` that opened it found changed by an `alter` (see [`Sequence::altered`]).
    altered: Arc<[crate::error::Altered]>,
}

impl std::fmt::Debug for Sequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sequence")
            .field("name", &self.drawer.name)
            .field("strategy", &self.drawer.strategy)
            .finish_non_exhaustive()
    }
}

impl Sequence {
    /// The drawer behind this handle (shared with its clones).
    pub(crate) fn drawer(&self) -> &Arc<Drawer> {
        &self.drawer
    }

    /// The dispenser it was opened from.
    pub(crate) fn dispenser(&self) -> &Dispenser {
        &self.dispenser
    }

    /// The sequence's name.
    pub fn name(&self) -> &str {
        &self.drawer.name
    }

    /// The settings the [`Dispenser::ensure`] that opened this handle found changed since by
    /// an `alter` (its bounds, step, cycle, format): each with its stored value, which is kept,
    /// and the value asked, which is not applied — so a process that ensures the spec in its
    /// code starts after an operator widened the sequence, and can say what differs. Empty
    /// for a handle from `create` or `open`, or when everything matched.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::Spec;
    /// let tickets = d.ensure("tickets", Spec::default().with_max(99)).await?;
    /// for a in tickets.altered() {
    ///     eprintln!("tickets: {} is {} here (asked {})", a.setting, a.stored, a.asked);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn altered(&self) -> &[crate::error::Altered] {
        &self.altered
    }

    /// Issues the next number.
    ///
    /// Concurrent calls on this handle and its clones share writes (see
    /// [`Options::coalesce`]): while a draw is in flight, new callers queue and are drawn
    /// together in one write, numbers going out in arrival order. Every number is still fixed
    /// by a write made during its own call, so the sequence stays linearizable.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before the write is sent (including while queued behind another
    /// draw) reserves nothing. Dropping it after the write was sent leaves the number a gap —
    /// never issued to anyone.
    ///
    /// # Errors
    ///
    /// [`Error::Exhausted`] (non-cyclic sequence at its bound; nothing written),
    /// [`Error::Contention`], [`Error::NotFound`] (deleted meanwhile),
    /// [`Error::CorruptDocument`], [`Error::Database`] or [`Error::Timeout`] (the number the
    /// write may have reserved is then a gap).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(seq: dispenser::Sequence) -> dispenser::Result<()> {
    /// let a = seq.next().await?;
    /// let b = seq.next().await?;
    /// assert_ne!(a, b);
    /// # Ok(()) }
    /// ```
    pub async fn next(&self) -> Result<i64> {
        Ok(self.next_n(1).await?.first())
    }

    /// Issues a contiguous run of `n` numbers in one write. With `cycle` a run never crosses
    /// the wrap: near the bound it stops there and holds fewer than `n` numbers (call again
    /// for the rest). Without `cycle`, fewer than `n` numbers left is [`Error::Exhausted`]
    /// and nothing is written.
    ///
    /// # Cancel safety
    ///
    /// As [`Sequence::next`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for `n == 0`, plus those of [`Sequence::next`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(seq: dispenser::Sequence) -> dispenser::Result<()> {
    /// let run = seq.next_n(100).await?;
    /// for id in run {
    ///     println!("{id}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn next_n(&self, n: u64) -> Result<Run> {
        if self.drawer.coalesce {
            coalesce::draw(&self.drawer, &self.combiner, n).await
        } else {
            self.drawer.draw(n).await
        }
    }

    /// What this handle (and its clones) did so far.
    pub fn stats(&self) -> Stats {
        self.drawer.stats.snapshot()
    }

    /// Reads the sequence's state now (one read; the handle's remembered state is not used).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] (deleted meanwhile), [`Error::CorruptDocument`],
    /// [`Error::Database`], [`Error::Timeout`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(orders: dispenser::Sequence) -> dispenser::Result<()> {
    /// let state = orders.peek().await?;
    /// println!("next order number: {:?}", state.next_number());
    /// # Ok(()) }
    /// ```
    pub async fn peek(&self) -> Result<SequenceState> {
        self.dispenser.peek(self.name()).await
    }

    /// Moves a sequence past `n` for after an import where numbers up to `n` were assigned
    /// elsewhere: afterwards the next number issued lies beyond `n` (above it, below it for a
    /// descending sequence) and is the first such number of the sequence's own progression
    /// (`value + k·step`: a sequence of odd numbers stays odd, a stripe stays in its residue
    /// class). It never moves a sequence backwards: if the sequence is already past `n`,
    /// nothing is written. CAS-safe against concurrent writers.
    ///
    /// Numbers other processes already reserved in blocks before the advance are still
    /// handed out by those block clients (see the guide's [eras](crate::guide::guarantees)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `n` lies outside the bounds, [`Error::Contention`],
    /// plus those of [`Sequence::peek`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave the sequence advanced or not (see
    /// [`Sequence::peek`]) and its history entry `pending` (see [`history`](crate::history));
    /// it issues no number. Calling it again with the same `n` completes it (it never moves a
    /// sequence backwards).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(orders: dispenser::Sequence) -> dispenser::Result<()> {
    /// let state = orders.advance_to(50_000).await?; // imported orders used ..=50000
    /// assert!(state.value >= 50_000);
    /// # Ok(()) }
    /// ```
    pub async fn advance_to(&self, n: i64) -> Result<SequenceState> {
        self.dispenser.advance_to(self.name(), n).await
    }

    /// Deletes the sequence (for a striped sequence's name, see
    /// [`Dispenser::delete_striped`](crate::Dispenser::delete_striped)). Its numbers may be issued again if it is created anew.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], [`Error::InvalidName`], [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave the sequence deleted or not (see
    /// [`Sequence::peek`]) and its history entry `pending` (see [`history`](crate::history));
    /// it issues no number.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// d.open("old-orders").await?.delete().await?;
    /// assert!(matches!(d.open("old-orders").await, Err(dispenser::Error::NotFound { .. })));
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self) -> Result<()> {
        self.dispenser.delete(self.name()).await
    }

    /// The history of the sequence (for a stripe `ids~3` or a scope `t@k`, its own): who
    /// changed what, oldest first — see [`History`](crate::history::History) for the
    /// options (`.since(t)`, `.after(cursor)`, `.limit(n)`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(orders: dispenser::Sequence) -> dispenser::Result<()> {
    /// for e in orders.history().limit(10).await? {
    ///     println!("{} {} by {:?}", e.at, e.op, e.who);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn history(&self) -> crate::history::History {
        self.dispenser.history(Kind::Sequence, self.name())
    }

    /// How many numbers are left before the wrap or the bound, as last seen by this handle.
    pub fn remaining_hint(&self) -> u64 {
        let s = *self
            .drawer
            .remembered
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        arith::remaining(&s.spec, s.value)
    }
}
