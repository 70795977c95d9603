//! Closing a block client: giving back the numbers it reserved but did not hand out.

use super::BlockSequence;
use super::state::Block;
use crate::error::Result;
use crate::stats::bump;

/// What [`BlockSequence::close`] did with the numbers the client still held.
///
/// # Example
///
/// ```no_run
/// # async fn f(blocks: dispenser::block::BlockSequence) -> dispenser::Result<()> {
/// let report = blocks.close().await?;
/// println!("{} given back, {} lost (a gap)", report.given_back, report.lost);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CloseReport {
    /// Reserved but unused numbers returned to the sequence: the next draw issues them.
    pub given_back: u64,
    /// Reserved but unused numbers that stay a gap (another client wrote after our last
    /// reservation, so they could not be returned safely).
    pub lost: u64,
}

impl BlockSequence {
    /// Stops the client and gives back the numbers it reserved but did not hand out, when
    /// that is safe: only if no one wrote the sequence after this client's last
    /// reservation (a compare-and-set on `version` and `value`). The sequence's value then
    /// moves back to just before the first unused number, and the next draw, by anyone,
    /// issues it. Otherwise they stay a gap (`lost`).
    ///
    /// A reserved but unused prefetched block counts too: both it and the tail of the
    /// current block are given back when they are contiguous and were reserved by
    /// consecutive writes; otherwise only the prefetched block (the latest write) is.
    ///
    /// Closing affects every clone: afterwards they all fail with [`Error::Closed`]. Waits
    /// for a reservation in flight (its block is counted). Closing twice reports nothing the
    /// second time.
    ///
    /// # Errors
    ///
    /// [`Error::Database`] or [`Error::Timeout`] when the give-back write failed: its outcome
    /// is unknown, so the numbers are either given back or a gap — never issued twice.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, though never at the cost of uniqueness: once polled, the client is
    /// closed. Dropped while it waits for a reservation in flight, or before its give-back
    /// write completed, the numbers the client held are given back (if that write went
    /// through) or a gap — never issued twice — and no report says which.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::block::BlockOptions;
    /// let options = BlockOptions::default().with_prefetch(None);
    /// let blocks = d.open_blocks("orders").options(options).await?;
    /// let first = blocks.next().await?;
    /// let report = blocks.close().await?;
    /// assert_eq!(report.given_back, 99); // no one else wrote meanwhile
    /// assert_eq!(d.open("orders").await?.next().await?, first + 1);
    /// # Ok(()) }
    /// ```
    ///
    /// [`Error::Closed`]: crate::Error::Closed
    /// [`Error::Database`]: crate::Error::Database
    /// [`Error::Timeout`]: crate::Error::Timeout
    pub async fn close(&self) -> Result<CloseReport> {
        let shared = &self.shared;
        {
            let mut st = shared.lock();
            if st.closed {
                return Ok(CloseReport::default());
            }
            st.closed = true;
        }
        // Wake callers waiting for a reservation: they now fail with `Closed`.
        shared.done.notify_waiters();
        loop {
            let notified = shared.done.notified();
            if shared.lock().inflight.is_none() {
                break;
            }
            notified.await;
        }
        let (tail, prefetched) = {
            let mut st = shared.lock();
            (
                st.current.take().filter(|b| b.left() > 0),
                st.next.take().filter(|b| b.left() > 0),
            )
        };
        let report = self.give_back(tail, prefetched).await;
        // The numbers this client reserved and the document's counters do not show yet
        // (statistics: a failure here fails nothing).
        let drawer = &self.shared.drawer;
        if let Err(e) = drawer.flush_usage().await {
            tracing::debug!(sequence = %drawer.name, error = %e, "could not add the closed block client's issued count");
        }
        report
    }

    async fn give_back(&self, tail: Option<Block>, fetched: Option<Block>) -> Result<CloseReport> {
        let held = tail.map_or(0, |b| b.left()) + fetched.map_or(0, |b| b.left());
        // Only the latest write can be undone: the prefetched block if there is one.
        let (version, last, first_unused, count) = match (tail, fetched) {
            (None, None) => return Ok(CloseReport::default()),
            (Some(b), None) | (None, Some(b)) => {
                (b.version, b.run.last(), b.run.nth_number(b.used), b.left())
            }
            (Some(t), Some(p)) => {
                let contiguous = p.version.version == t.version.version + 1
                    && p.version.incarnation == t.version.incarnation
                    && i128::from(p.run.first())
                        == i128::from(t.run.last()) + i128::from(t.run.step());
                if contiguous {
                    (
                        p.version,
                        p.run.last(),
                        t.run.nth_number(t.used),
                        t.left() + p.left(),
                    )
                } else {
                    (p.version, p.run.last(), p.run.first(), p.left())
                }
            }
        };
        let drawer = &self.shared.drawer;
        let spec = drawer.spec();
        let lost_all = CloseReport {
            given_back: 0,
            lost: held,
        };
        let Some(new_value) = first_unused.checked_sub(spec.step) else {
            return Ok(lost_all);
        };
        bump(&drawer.stats.round_trips);
        bump(&drawer.stats.writes);
        let given = drawer
            .store
            .give_back(&drawer.name, &spec, version, last, new_value)
            .await?;
        Ok(if given {
            CloseReport {
                given_back: count,
                lost: held - count,
            }
        } else {
            lost_all
        })
    }
}
