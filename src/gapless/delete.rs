//! Deleting a gap-free sequence ([`Dispenser::delete_gapless`], [`Gapless::delete`]): its state
//! document goes, the business collection and every document in it (used and voided numbers)
//! stay.

use bson::{Bson, doc};

use super::Gapless;
use super::state::GaplessState;
use crate::dispenser::Dispenser;
use crate::error::{Aftermath, Error, Result};

/// How many times a delete without force reads the state again after callers moved it.
const ATTEMPTS: u32 = 64;

impl Dispenser {
    /// Deletes the gap-free sequence `name`: its state document (next number, lease, longest
    /// lease) goes; the business collection, its unique index and every document in it —
    /// the used numbers and the void documents — stay, and [`audit`](super::audit) still
    /// reads them.
    ///
    /// Refused while a holder's lease runs by the server's clock (a number is held: its
    /// business write could still land and then nothing would move the sequence past it),
    /// unless [`DeleteGapless::force`]: the operator asserts no holder is alive. Either
    /// way nothing is ever used twice: a sequence created again under the name starts at its
    /// `start` and moves past every number the business collection carries (each one
    /// meets the unique index), so create it again with the `start` after the last number
    /// to skip that walk. A handle opened before the delete fails with
    /// [`Error::NotFound`] once it needs the state document; a business write it makes
    /// meanwhile still meets the unique index.
    ///
    /// The history records the delete, with the state before it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`], [`Error::NotFound`], [`Error::LeaseHeld`] (a live
    /// lease, without force: nothing written), [`Error::Database`], [`Error::Timeout`],
    /// [`Error::CorruptDocument`].
    ///
    /// # Cancel safety
    ///
    /// Dropped part way, the sequence may be deleted or not (its record says which when it
    /// was written); deleting again answers [`Error::NotFound`] once it is gone.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// d.delete_gapless("invoices-2025").await?;
    /// // A holder that was killed mid-write still holds its lease: delete anyway.
    /// d.delete_gapless("invoices-2024").force(true).await?;
    /// # Ok(()) }
    /// ```
    pub fn delete_gapless<'a>(&'a self, name: &'a str) -> DeleteGapless<'a> {
        DeleteGapless {
            of: Of::Name(self, name),
            force: false,
        }
    }
}

impl Gapless {
    /// Deletes this gap-free sequence, as [`Dispenser::delete_gapless`] does by name: its
    /// state goes, the business collection and its documents stay; refused while a holder's
    /// lease runs unless [`DeleteGapless::force`]. Returns a [`DeleteGapless`] to `.await`.
    /// This handle (and every other) then fails with [`Error::NotFound`] once it needs the
    /// state document.
    ///
    /// # Errors
    ///
    /// As [`Dispenser::delete_gapless`].
    ///
    /// # Cancel safety
    ///
    /// As [`Dispenser::delete_gapless`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// g.delete().force(true).await?;
    /// # Ok(()) }
    /// ```
    pub fn delete(&self) -> DeleteGapless<'_> {
        DeleteGapless {
            of: Of::Handle(self),
            force: false,
        }
    }
}

/// A delete of a gap-free sequence ([`Dispenser::delete_gapless`], [`Gapless::delete`]).
/// `.await` it.
#[must_use = "a delete does nothing until it is awaited"]
#[derive(Debug)]
pub struct DeleteGapless<'a> {
    of: Of<'a>,
    force: bool,
}

/// What a [`DeleteGapless`] deletes: a sequence by name, or a handle's.
#[derive(Debug)]
enum Of<'a> {
    Name(&'a Dispenser, &'a str),
    Handle(&'a Gapless),
}

impl DeleteGapless<'_> {
    /// With `true`, deletes even while a holder's lease runs: the operator asserts no holder
    /// is alive (nothing is used twice if one is: see [`Dispenser::delete_gapless`]).
    /// Defaults to false.
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }
}

impl<'a> std::future::IntoFuture for DeleteGapless<'a> {
    type Output = Result<()>;
    type IntoFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let opened;
            let g = match self.of {
                Of::Name(d, name) => {
                    opened = d.open_gapless(name).await?;
                    &opened
                }
                Of::Handle(g) => {
                    // Its own used numbers confirmed first: their lease is no holder's.
                    g.settle_own().await;
                    g
                }
            };
            // A delete the state refuses is refused before anything is written, history
            // included.
            let before = g.inner.read_state().await?;
            g.deletable(&before, self.force)?;
            let params = doc! { "force": self.force };
            g.recorded(
                "delete",
                params,
                &before,
                g.delete_now(before.clone(), self.force),
            )
            .await
        })
    }
}

impl Gapless {
    /// Whether state `s` may be deleted: not while a lease runs, unless `force`.
    fn deletable(&self, s: &GaplessState, force: bool) -> Result<()> {
        match &s.lease {
            Some(l) if !force && !s.lease_expired() => Err(Error::LeaseHeld {
                name: self.inner.name.clone(),
                number: l.number,
                until: l.expires,
            }),
            _ => Ok(()),
        }
    }

    /// Deletes the state document if it is still in state `s` (the same next number and
    /// holder), reading it again when it changed; with `force`, whatever its state.
    async fn delete_now(&self, mut s: GaplessState, force: bool) -> Result<()> {
        let inner = &self.inner;
        let started = std::time::Instant::now();
        for attempt in 1..=ATTEMPTS {
            let filter = if force {
                doc! { "_id": &inner.name }
            } else {
                let holder = s
                    .lease
                    .as_ref()
                    .map_or(Bson::Null, |l| Bson::ObjectId(l.holder));
                doc! { "_id": &inner.name, "next": s.next, "lease.holder": holder }
            };
            let r = inner
                .bounded(
                    "deleting it",
                    Aftermath::Admin,
                    inner.state.delete_one(filter),
                )
                .await?;
            if r.deleted_count == 1 {
                return Ok(());
            }
            // A caller took or moved the lease between the read and the delete (or another
            // client deleted it): decide again from what is there now.
            s = inner.read_state().await?;
            self.deletable(&s, force)?;
            if attempt == ATTEMPTS {
                break;
            }
        }
        Err(Error::Contention {
            name: inner.name.clone(),
            attempts: ATTEMPTS,
            elapsed: started.elapsed(),
        })
    }
}
