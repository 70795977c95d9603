//! [`Gapless::void`] and [`Gapless::release`]: a void is a document in the business
//! collection, so the unique index decides between it and a late business write of the same
//! number; both make sure the index is there and look the number up before they write.

use bson::doc;
use bson::oid::ObjectId;

use super::lease::Found;
use super::path::set_field;
use super::{Gapless, GaplessState};
use crate::error::{Aftermath, Error, Result};
use crate::store::{is_duplicate_key, is_validation_failure};

/// What [`Gapless::release`] did. Every surface answers it in one shape, its
/// [`to_json`](Released::to_json): `{"outcome": "voided", "number"}` or `{"outcome": "used",
/// "first", "last"}`.
///
/// # Example
///
/// ```
/// use dispenser::gapless::Released;
/// let r = Released::Voided(7);
/// assert!(matches!(r, Released::Voided(7)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Released {
    /// The holder had not written the number: it is voided, with the reason.
    Voided(i64),
    /// The holder had written `first` to `last` (under one lease): the sequence moved past
    /// them.
    Used {
        /// The held number.
        first: i64,
        /// The last number of the run the holder wrote.
        last: i64,
    },
}

impl Released {
    /// The one shape every surface answers a release in (the command line's `gapless release
    /// --json`, the service, Python, Node.js): `{"outcome": "voided", "number": n}`, or
    /// `{"outcome": "used", "first": n, "last": m}`.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::gapless::Released;
    /// assert_eq!(
    ///     Released::Voided(7).to_json(),
    ///     serde_json::json!({ "outcome": "voided", "number": 7 })
    /// );
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        match *self {
            Released::Voided(number) => {
                serde_json::json!({ "outcome": "voided", "number": number })
            }
            Released::Used { first, last } => {
                serde_json::json!({ "outcome": "used", "first": first, "last": last })
            }
        }
    }
}

/// A void's reason, trimmed: 1 to 1000 bytes.
fn check_reason(reason: &str) -> Result<&str> {
    let reason = reason.trim();
    if reason.is_empty() || reason.len() > 1000 {
        return Err(Error::invalid_argument(
            "void reason",
            "give a reason of 1 to 1000 bytes (it is kept with the voided number)",
        ));
    }
    Ok(reason)
}

impl Gapless {
    /// Voids `number` on purpose, with a reason (some laws require voided invoice numbers to
    /// be recorded): a **void document** `{<field>: number, <void_field>: {reason, at,
    /// sequence}}` (plus [`void_extra`](super::GaplessOptions::void_extra)) is inserted into
    /// the business collection and the sequence moves past the number.
    ///
    /// The unique index on the number field decides between a void and any business write
    /// of the same number, so **a number is never both voided and used**: a holder whose
    /// write comes after the void (one that stalled past its lease) gets a duplicate key and
    /// goes on with the next number; a void that comes after a write is refused. The
    /// [audit](super::audit) counts void documents as voided, not missing.
    ///
    /// Only the next number can be voided — the one no document carries yet — and not while
    /// a live lease holds it (by the server's clock). It first makes sure the unique index is
    /// there (creating it again if someone dropped it) and looks the number up with majority
    /// read concern: a number a document carries is never voided, whatever happened to the
    /// index. A caller that takes the number between this check and the insert loses it to
    /// the void at the index and moves on.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseHeld`] for a number held by a live lease (nothing written);
    /// [`Error::InvalidArgument`] for an empty reason (or over 1000 bytes), a number that is
    /// not the next one (saying which is), or one a document already carries (a holder that died after its write, or a void that just won: nothing
    /// is voided, the sequence moves past it); [`Error::CorruptDocument`] when a document
    /// holds the number as a `Decimal128` or in an array; [`Error::Exhausted`] at `i64::MAX`;
    /// [`Error::Database`], [`Error::Timeout`] (whether the void document was written is then
    /// unknown: [`peek`](Gapless::peek) or the audit shows it).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe as far as the numbers go: dropped after the insert, the number is voided
    /// and the next caller moves past it; before, nothing happened.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// let next = g.peek().await?.next;
    /// g.void(next, "printer jam: form destroyed").await?;
    /// # Ok(()) }
    /// ```
    pub async fn void(&self, number: i64, reason: &str) -> Result<()> {
        let reason = check_reason(reason)?;
        self.settle_own().await;
        // A void the state refuses is refused before anything is written, history included.
        let before = self.inner.read_state().await?;
        self.voidable(number, &before)?;
        let params = doc! { "number": number, "reason": reason };
        self.recorded("void", params, &before, self.void_now(number, reason))
            .await
    }

    /// [`Gapless::void`] without its history: from a fresh read.
    async fn void_now(&self, number: i64, reason: &str) -> Result<()> {
        let inner = &self.inner;
        let s = inner.read_state().await?;
        let holder = self.voidable(number, &s)?;
        match self.void_document(number, holder, reason, &s).await? {
            Released::Voided(_) => Ok(()),
            Released::Used { .. } => Err(Error::invalid_argument(
                "void",
                format!(
                    "{number} is already carried by a document of {:?} (used, or voided just now); nothing voided, the sequence moved past it",
                    inner.options.collection
                ),
            )),
        }
    }

    /// Whether `number` may be voided in state `s`: the holder whose expired lease the void
    /// ends, if any; or why not.
    fn voidable(&self, number: i64, s: &GaplessState) -> Result<Option<ObjectId>> {
        let inner = &self.inner;
        if number != s.next {
            let what = if number < s.next {
                "is already used or voided"
            } else {
                "is not handed out yet"
            };
            return Err(Error::NotTheNextNumber {
                name: inner.name.clone(),
                number,
                next: s.next,
                reason: format!(
                    "{number} {what}; only the next number of gap-free sequence {:?}, {}, can be voided",
                    inner.name, s.next
                ),
            });
        }
        let holder = match &s.lease {
            None => None,
            Some(l) if s.lease_expired() => Some(l.holder),
            Some(l) => {
                return Err(Error::LeaseHeld {
                    name: inner.name.clone(),
                    number,
                    until: l.expires,
                });
            }
        };
        Ok(holder)
    }

    /// Ends the lease on `number` of a holder that stopped, at once — instead of waiting
    /// for its lease to run out: if the holder did not write the number, it is **voided**
    /// with `reason` (a void document, as [`Gapless::void`] writes); if it did (and maybe
    /// more numbers after it, under the same lease), the sequence **moves past** them. Either
    /// way the lease is freed and the next caller goes on at once.
    ///
    /// Only the held number can be released (the sequence's `next`, while a holder holds
    /// it). While its lease has not run out by the server's clock, the holder's write could
    /// still land, and the release is refused — unless [`ReleaseLease::force`]: the operator
    /// asserts the holder is dead. Even then nothing breaks if it is not: the unique index (made sure of
    /// first) decides between the void document and the holder's write, so a write that
    /// lands after a forced release fails with a duplicate key and its holder moves on to the
    /// next number; a number is never both used and voided, nor used twice.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseHeld`] for a live lease without [`ReleaseLease::force`] (nothing
    /// written); [`Error::InvalidArgument`] for an empty reason (or over 1000 bytes), a
    /// number that is not the held one (saying which is), a number no one holds, or a number a write of the holder is landing on (not yet committed by a
    /// majority: try again); [`Error::Exhausted`] at `i64::MAX`; [`Error::Database`] (among
    /// them a unique index that cannot be created again), [`Error::Timeout`] (the status
    /// then shows what happened), [`Error::CorruptDocument`] (a document holding the number
    /// as a `Decimal128` or in an array).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe as far as the numbers go, like [`Gapless::void`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// use dispenser::gapless::Released;
    /// let s = g.peek().await?;
    /// if let Some(lease) = s.lease {
    ///     // The process that held it was killed: end its lease now, not when it runs out.
    ///     match g.release(lease.number, "holder killed during the upgrade").force(true).await? {
    ///         Released::Voided(n) => println!("{n} voided"),
    ///         Released::Used { first, last } => println!("{first} to {last} were written"),
    ///         _ => {}
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn release(&self, number: i64, reason: impl Into<String>) -> ReleaseLease<'_> {
        ReleaseLease {
            gapless: self,
            number,
            reason: reason.into(),
            force: false,
        }
    }

    /// The release [`ReleaseLease`] runs.
    async fn release_lease(&self, number: i64, reason: &str, force: bool) -> Result<Released> {
        let reason = check_reason(reason)?;
        self.settle_own().await;
        // A release the state refuses is refused before anything is written, history included.
        let before = self.inner.read_state().await?;
        self.releasable(number, force, &before)?;
        let params = doc! { "number": number, "reason": reason, "force": force };
        self.recorded(
            "release",
            params,
            &before,
            self.release_now(number, reason, force),
        )
        .await
    }

    /// [`Gapless::release`] without its history: from a fresh read.
    async fn release_now(&self, number: i64, reason: &str, force: bool) -> Result<Released> {
        let s = self.inner.read_state().await?;
        let holder = self.releasable(number, force, &s)?;
        self.void_document(number, Some(holder), reason, &s).await
    }

    /// The holder whose lease on `number` a release ends in state `s`, or why not.
    fn releasable(&self, number: i64, force: bool, s: &GaplessState) -> Result<ObjectId> {
        let inner = &self.inner;
        if number != s.next {
            return Err(Error::NotTheNextNumber {
                name: inner.name.clone(),
                number,
                next: s.next,
                reason: format!(
                    "{number} is not held; only the number a holder of gap-free sequence {:?} holds, {}, can be released",
                    inner.name, s.next
                ),
            });
        }
        let Some(l) = &s.lease else {
            return Err(Error::invalid_argument(
                "release",
                format!(
                    "{number} of gap-free sequence {:?} has no holder: there is no lease to end (to void the number, void it)",
                    inner.name
                ),
            ));
        };
        if !s.lease_expired() && !force {
            return Err(Error::LeaseHeld {
                name: inner.name.clone(),
                number,
                until: l.expires,
            });
        }
        Ok(l.holder)
    }

    /// Voids `number` (`next`, free or held by `holder`, whose lease may end) unless a
    /// document carries it already: makes sure of the unique index, looks the number up
    /// (majority), inserts the void document (the index decides against a write landing
    /// meanwhile) and moves the sequence past what carries the number.
    async fn void_document(
        &self,
        number: i64,
        holder: Option<ObjectId>,
        reason: &str,
        s: &GaplessState,
    ) -> Result<Released> {
        let inner = &self.inner;
        // `i64::MAX - 1` is the last number: voiding it moves `next` to `i64::MAX`, as its
        // issue does; `i64::MAX` itself is no number.
        let to = number
            .checked_add(1)
            .ok_or_else(|| inner.exhausted(number))?;
        // The index decides between this void and any write of the number: make sure it is
        // there (someone may have dropped it), and look before writing, so that a void never
        // adds a document for a number a business document carries, whatever happened to it.
        inner.check_index().await?;
        match inner.lookup(number, true).await? {
            Found::Nothing => {}
            found => return self.carried(number, holder, found).await,
        }
        let o = &inner.options;
        let mut void = o.void_extra.clone();
        set_field(&mut void, &o.field, number)?;
        set_field(
            &mut void,
            &o.void_field,
            doc! { "reason": reason, "at": s.server_time, "sequence": &inner.name },
        )?;
        match inner
            .bounded(
                "writing the void document",
                Aftermath::GapFree,
                inner.business.insert_one(void),
            )
            .await
        {
            Ok(_) => {}
            Err(Error::Database { source, .. }) if is_duplicate_key(&source) => {
                let found = inner.lookup(number, true).await?;
                return self.carried(number, holder, found).await;
            }
            Err(Error::Database { source, .. }) if is_validation_failure(&source) => {
                return Err(Error::database(
                    format!(
                        "writing the void document of {number} of gap-free sequence {:?} into {:?}, whose validator refused it: nothing was voided (a void document holds the number, {:?} and `void_extra`, fixed when the sequence was created; let the validator accept it)",
                        inner.name, o.collection, o.void_field
                    ),
                    source,
                ));
            }
            Err(e) => return Err(e),
        }
        // Voided. Move the sequence past it; if a caller took the number meanwhile, its write
        // meets the void document at the index and it moves past the number itself.
        if let Err(e) = inner
            .settle(
                holder,
                number,
                to,
                "moving past a voided number",
                Aftermath::Lease,
            )
            .await
        {
            tracing::warn!(sequence = %inner.name, number, "{e} (the number is voided; the next taker moves past it)");
        }
        Ok(Released::Voided(number))
    }

    /// A document carries `number` (what the look-up `found`): move past it, or say that a
    /// write is landing on it.
    async fn carried(
        &self,
        number: i64,
        holder: Option<ObjectId>,
        found: Found,
    ) -> Result<Released> {
        let inner = &self.inner;
        match found {
            Found::Committed(last) => {
                let to = last.saturating_add(1);
                // Used (its holder stopped before confirming), or voided by a void that just
                // won: move past it as a taker would. If this fails, the next taker finds the
                // number used and moves past it itself.
                if let Err(e) = inner
                    .settle(
                        holder,
                        number,
                        to,
                        "moving past a used number",
                        Aftermath::Lease,
                    )
                    .await
                {
                    tracing::debug!(sequence = %inner.name, number, error = %e, "could not move past a used number; the next taker will");
                }
                Ok(Released::Used {
                    first: number,
                    last,
                })
            }
            _ => Err(Error::invalid_argument(
                "void",
                format!(
                    "{number} is being written by another caller of gap-free sequence {:?}; try again",
                    inner.name
                ),
            )),
        }
    }

    /// Confirms this handle's own pending number, so that a status or void right after an
    /// `issue` on the same handle sees the sequence past the number it returned. Waits for a
    /// call of the handle that is running, at most the operation timeout (then that call
    /// confirms it).
    pub(super) async fn settle_own(&self) {
        let lock = self.inner.baton.clone().lock_owned();
        if let Ok(mut baton) = tokio::time::timeout(self.inner.timeout, lock).await
            && let Err(e) = self.inner.settle_all(&mut baton).await
        {
            tracing::warn!(sequence = %self.inner.name, "{e} (the next caller will find the number used and move past it)");
        }
    }
}

/// A release of a dead holder's lease ([`Gapless::release`]). `.await` it for what became of
/// the number.
#[must_use = "a release does nothing until it is awaited"]
#[derive(Debug)]
pub struct ReleaseLease<'a> {
    gapless: &'a Gapless,
    number: i64,
    reason: String,
    force: bool,
}

impl ReleaseLease<'_> {
    /// With `true`, releases even a lease that has not run out by the server's clock: the
    /// operator asserts the holder is dead (nothing breaks if it is not, see
    /// [`Gapless::release`]). Defaults to false.
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }
}

impl<'a> std::future::IntoFuture for ReleaseLease<'a> {
    type Output = Result<Released>;
    type IntoFuture =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Released>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            self.gapless
                .release_lease(self.number, &self.reason, self.force)
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::check_reason;

    /// A reason is trimmed and holds 1 to 1000 bytes: exactly 1000 is kept, 1001 refused,
    /// and a reason of spaces is none.
    #[test]
    fn a_reason_is_1_to_1000_bytes_once_trimmed() {
        assert_eq!(check_reason("  torn  ").unwrap(), "torn");
        let most = "é".repeat(500); // 1000 bytes
        assert_eq!(check_reason(&most).unwrap(), most);
        assert!(check_reason(&format!("{most}x")).is_err());
        assert!(check_reason("").is_err());
        assert!(check_reason(" \t ").is_err());
    }
}
