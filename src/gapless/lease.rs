//! The database side of leases: each write of [`state`](super::state) sent, bounded by the
//! operation timeout and counted, and the look-up of a number in the business collection.

use std::sync::atomic::Ordering::Relaxed;

use bson::oid::ObjectId;
use bson::{Bson, Document, doc};
use futures::TryStreamExt;
use mongodb::options::{ReadConcern, ReturnDocument};

use super::path::number_in;
use super::state::{self, GaplessState};
use super::{Inner, Owed};
use crate::error::{Aftermath, Error, Result};

/// A lease taken by [`Inner::take`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Taken {
    /// The number held.
    pub(super) number: i64,
    /// The holder whose lease had run out, when this take took over from one.
    pub(super) took_over: Option<ObjectId>,
}

/// How far a look-up reads ahead for used numbers after the one it looks for (a holder
/// that stopped may have used a run of numbers under its lease).
const RUN_SCAN: i64 = 1000;

/// What a look-up found in the business collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// Documents carry the number and every number after it up to this one, committed by a
    /// majority: they are used (or voided).
    Committed(i64),
    /// A document carries it on the primary, not (yet) committed by a majority: the
    /// number cannot be moved past (a failover may roll the document back), nor written.
    Uncommitted,
    /// No document carries it.
    Nothing,
}

impl Inner {
    /// Runs one database operation under the operation timeout, counting it. `left` says
    /// what it leaves behind when it fails without an answer: [`Aftermath::Read`] for a read,
    /// [`Aftermath::Lease`] for a lease's write (no number used or voided by it), else what
    /// the write is for.
    pub(super) async fn bounded<T>(
        &self,
        what: &str,
        left: Aftermath,
        op: impl IntoFuture<Output = mongodb::error::Result<T>>,
    ) -> Result<T> {
        self.counters.round_trips.fetch_add(1, Relaxed);
        if left != Aftermath::Read {
            self.counters.writes.fetch_add(1, Relaxed);
        }
        let context = || format!("{what} of gap-free sequence {:?}", self.name);
        match tokio::time::timeout(self.timeout, op.into_future()).await {
            Ok(r) => r.map_err(|e| Error::database_as(context(), e, left)),
            Err(_) => Err(Error::timeout(context(), self.timeout, left)),
        }
    }

    /// The state with the server's time (voids not included).
    pub(super) async fn read_state(&self) -> Result<GaplessState> {
        let read = async {
            let mut cursor = self
                .state
                .aggregate(state::read_pipeline(&self.name))
                .await?;
            cursor.try_next().await
        };
        let d = self
            .bounded("reading the state", Aftermath::Read, read)
            .await?
            .ok_or_else(|| Error::NotFound {
                kind: crate::error::Kind::Gapless,
                name: self.name.clone(),
            })?;
        state::decode(&self.name, &d)
    }

    /// Takes the lease on `next` for `me` if it is free (and, when `polite`, no one waits
    /// for it) or ran out. `None` when it is held.
    pub(super) async fn take(&self, me: ObjectId, polite: bool) -> Result<Option<Taken>> {
        let before = self
            .bounded(
                "taking a lease",
                Aftermath::Lease,
                self.state
                    .find_one_and_update(
                        state::take_filter(&self.name, polite),
                        state::take_update(me, state::lease_ms(self.options.lease)),
                    )
                    .projection(doc! { "next": 1, "lease.holder": 1 })
                    .return_document(ReturnDocument::Before),
            )
            .await?;
        let Some(before) = before else {
            self.counters.conflicts.fetch_add(1, Relaxed);
            return Ok(None);
        };
        let number = before
            .get_i64("next")
            .map_err(|_| Error::corrupt(&self.name, "next", "must be a 64-bit integer"))?;
        let took_over = before
            .get_document("lease")
            .ok()
            .and_then(|l| l.get_object_id("holder").ok());
        Ok(Some(Taken { number, took_over }))
    }

    /// Confirms the numbers from `next` to `to - 1` (used, under `holder`'s lease) and takes
    /// the lease on `to` for `me`, in one write; `false` when a caller waits or the lease is
    /// no longer `holder`'s.
    pub(super) async fn chain(
        &self,
        holder: ObjectId,
        next: i64,
        to: i64,
        me: ObjectId,
    ) -> Result<bool> {
        let r = self
            .bounded(
                "confirming a number and taking the next",
                Aftermath::Lease,
                self.state.update_one(
                    state::chain_filter(&self.name, holder, next),
                    state::chain_update(to, me, state::lease_ms(self.options.lease)),
                ),
            )
            .await?;
        if r.matched_count == 0 {
            self.counters.conflicts.fetch_add(1, Relaxed);
        }
        Ok(r.matched_count == 1)
    }

    /// While `holder` (`None`: no one) holds `number`, sets `next` to `to` and frees the
    /// lease. `false` when that is no longer so. `left`: [`Aftermath::Lease`] where this is
    /// the library's own bookkeeping, [`Aftermath::GapFree`] where it is what the call is
    /// for (a release).
    pub(super) async fn settle(
        &self,
        holder: Option<ObjectId>,
        number: i64,
        to: i64,
        what: &str,
        left: Aftermath,
    ) -> Result<bool> {
        self.bounded(
            what,
            left,
            self.state.update_one(
                state::settle_filter(&self.name, holder, number),
                state::settle_update(to),
            ),
        )
        .await
        .map(|r| r.matched_count == 1)
    }

    /// Frees `holder`'s lease, wherever `next` is (a call that does not know its number);
    /// nothing when it is no longer `holder`'s.
    pub(super) async fn release_any(&self, holder: ObjectId) -> Result<()> {
        self.bounded(
            "releasing a lease",
            Aftermath::Lease,
            self.state.update_one(
                doc! { "_id": &self.name, "lease.holder": holder },
                doc! { "$set": { "lease.holder": Bson::Null } },
            ),
        )
        .await
        .map(drop)
    }

    /// Settles what a call left behind; failures are logged (the lease then runs out).
    pub(super) async fn pay(&self, owed: Owed) {
        let r = match owed {
            Owed::Release(holder) => self.release_any(holder).await,
            Owed::Settle { holder, number, to } => self
                .settle(
                    Some(holder),
                    number,
                    to,
                    "confirming a number",
                    Aftermath::Lease,
                )
                .await
                .map(drop),
        };
        if let Err(e) = r {
            tracing::warn!(sequence = %self.name, "{e} (the lease will run out instead; the next caller then finds the number used or free)");
        }
    }

    /// Says on `holder`'s lease that a caller waits (so a handle issuing in a tight loop
    /// lets it in).
    pub(super) async fn flag_want(&self, holder: ObjectId) -> Result<()> {
        self.bounded(
            "saying a caller waits",
            Aftermath::Lease,
            self.state
                .update_one(state::want_filter(&self.name, holder), state::want_update()),
        )
        .await
        .map(drop)
    }

    /// Whether business documents carry `n` (and how far the run of used numbers from `n`
    /// goes), read with **majority read concern**: a document a failover may still roll
    /// back does not count, so the sequence never moves past a number that then has no
    /// document. With `or_uncommitted`, a document carrying `n` seen only without majority
    /// (read concern `local`) is reported as [`Found::Uncommitted`] (one more read).
    ///
    /// A document whose field holds `n` as a number of another type or shape (a
    /// `Decimal128`, an array) is [`Error::CorruptDocument`] naming its `_id`: the unique
    /// index sees the number as taken, and the sequence cannot read it, so it would
    /// otherwise stop there.
    pub(super) async fn lookup(&self, n: i64, or_uncommitted: bool) -> Result<Found> {
        let field = self.options.field.as_str();
        let what = "looking for a number in the business collection";
        let end = n.saturating_add(RUN_SCAN);
        let run = async {
            self.business
                .find(doc! { field: { "$gte": n, "$lt": end } })
                .sort(doc! { field: 1 })
                .projection(doc! { field: 1, "_id": 1 })
                .limit(RUN_SCAN)
                .read_concern(ReadConcern::majority())
                .await?
                .try_collect::<Vec<Document>>()
                .await
        };
        let mut last = None;
        for d in self.bounded(what, Aftermath::Read, run).await? {
            let m = match number_in(&d, field) {
                Ok(Some(m)) => m,
                Ok(None) => break,
                // Whether it holds `n` itself (the server's equality, as the index's); past
                // the run found so far it does not, and the next look-up meets it first.
                Err(problem) => {
                    let id = d.get("_id").cloned().unwrap_or(Bson::Null);
                    let carries = self.bounded(
                        what,
                        Aftermath::Read,
                        self.business
                            .find_one(doc! { "_id": id, field: n })
                            .projection(doc! { "_id": 1 })
                            .read_concern(ReadConcern::majority()),
                    );
                    if carries.await?.is_some() {
                        return Err(self.malformed(&d, &problem));
                    }
                    break;
                }
            };
            match last {
                None if m == n => last = Some(n),
                Some(l) if m == l + 1 => last = Some(m),
                // Past the run (or a number twice, where the unique index was dropped: the
                // next look-up goes on from there).
                _ => break,
            }
        }
        if let Some(last) = last {
            return Ok(Found::Committed(last));
        }
        if or_uncommitted
            && let Some(d) = self
                .bounded(
                    what,
                    Aftermath::Read,
                    self.business
                        .find_one(doc! { field: n })
                        .projection(doc! { field: 1, "_id": 1 })
                        .read_concern(ReadConcern::local()),
                )
                .await?
        {
            if let Err(problem) = number_in(&d, field) {
                return Err(self.malformed(&d, &problem));
            }
            return Ok(Found::Uncommitted);
        }
        Ok(Found::Nothing)
    }

    /// A business document whose number field holds a number of another type or shape.
    fn malformed(&self, d: &Document, problem: &str) -> Error {
        let id = d.get("_id").map_or_else(|| "?".to_owned(), Bson::to_string);
        Error::corrupt(
            &self.name,
            &self.options.field,
            format!(
                "of business document _id {id} in collection {:?} {problem}; the unique index sees a number there that the sequence cannot read — fix or remove that document (`dispenser audit` lists every such document)",
                self.options.collection
            ),
        )
    }

    /// The first [`AUDIT_LIST_LIMIT`](super::AUDIT_LIST_LIMIT) void documents, in number order.
    pub(super) async fn read_voids(&self) -> Result<Vec<Document>> {
        let (field, void) = (&self.options.field, &self.options.void_field);
        let read = async {
            self.business
                .find(doc! { void.as_str(): { "$type": "object" }, field.as_str(): { "$exists": true } })
                .sort(doc! { field.as_str(): 1 })
                .projection(doc! { field.as_str(): 1, void.as_str(): 1, "_id": 0 })
                .limit(i64::try_from(super::AUDIT_LIST_LIMIT).unwrap_or(i64::MAX))
                .read_concern(ReadConcern::majority())
                .await?
                .try_collect::<Vec<_>>()
                .await
        };
        self.bounded("reading the voided numbers", Aftermath::Read, read)
            .await
    }
}
