//! [`Gapless::void`]: a void is a document in the business collection, so the unique index
//! decides between it and a late business write of the same number.

use bson::doc;

use super::Gapless;
use super::lease::Found;
use super::path::set_field;
use crate::error::{Error, Result};
use crate::store::is_duplicate_key;

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
    /// a live lease holds it (by the server's clock). A caller that takes the number between
    /// this check and the insert loses it to the void at the index and moves on.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty reason (or over 1000 bytes), a number that is
    /// not the next one (saying which is), a number held by a live lease, or one a document
    /// already carries (a holder that died after its write, or a void that just won: nothing
    /// is voided, the sequence moves past it); [`Error::Exhausted`] at `i64::MAX`;
    /// [`Error::Database`], [`Error::Timeout`] (whether the void document was written is then
    /// unknown: [`status`](Gapless::status) or the audit shows it).
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
    /// let next = g.status().await?.next;
    /// g.void(next, "printer jam: form destroyed").await?;
    /// # Ok(()) }
    /// ```
    pub async fn void(&self, number: i64, reason: &str) -> Result<()> {
        let inner = &self.inner;
        let reason = reason.trim();
        if reason.is_empty() || reason.len() > 1000 {
            return Err(Error::invalid_argument(
                "void reason",
                "give a reason of 1 to 1000 bytes (it is kept with the voided number)",
            ));
        }
        self.settle_own().await;
        let s = inner.read_state().await?;
        if number != s.next {
            let what = if number < s.next {
                "is already used or voided"
            } else {
                "is not handed out yet"
            };
            return Err(Error::invalid_argument(
                "void",
                format!(
                    "{number} {what}; only the next number of gap-free sequence {:?}, {}, can be voided",
                    inner.name, s.next
                ),
            ));
        }
        let to = number
            .checked_add(1)
            .filter(|&to| to < i64::MAX)
            .ok_or_else(|| inner.exhausted(number))?;
        let holder = match &s.lease {
            None => None,
            Some(l) if s.lease_expired() => Some(l.holder),
            Some(l) => {
                return Err(Error::invalid_argument(
                    "void",
                    format!(
                        "{number} of gap-free sequence {:?} is held by a caller until {} (server time); try again after",
                        inner.name,
                        l.expires.try_to_rfc3339_string().unwrap_or_default()
                    ),
                ));
            }
        };
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
                true,
                inner.business.insert_one(void),
            )
            .await
        {
            Ok(_) => {}
            Err(Error::Database { source, .. }) if is_duplicate_key(&source) => {
                return Err(match inner.lookup(number, true).await? {
                    Found::Committed(last) => {
                        let to = last.saturating_add(1);
                        // Used (its holder stopped before confirming), or voided by a void
                        // that just won: move past it as a taker would. If this fails, the
                        // next taker finds the number used and moves past it itself.
                        if let Err(e) = inner
                            .settle(holder, number, to, "moving past a used number")
                            .await
                        {
                            tracing::debug!(sequence = %inner.name, number, error = %e, "could not move past a used number; the next taker will");
                        }
                        Error::invalid_argument(
                            "void",
                            format!(
                                "{number} is already carried by a document of {:?} (used, or voided just now); nothing voided, the sequence moved past it",
                                o.collection
                            ),
                        )
                    }
                    _ => Error::invalid_argument(
                        "void",
                        format!(
                            "{number} is being written by another caller of gap-free sequence {:?}; try again",
                            inner.name
                        ),
                    ),
                });
            }
            Err(e) => return Err(e),
        }
        // Voided. Move the sequence past it; if a caller took the number meanwhile, its write
        // meets the void document at the index and it moves past the number itself.
        if let Err(e) = inner
            .settle(holder, number, to, "moving past a voided number")
            .await
        {
            tracing::warn!(sequence = %inner.name, number, "{e} (the number is voided; the next taker moves past it)");
        }
        Ok(())
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
