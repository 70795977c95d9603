//! Reserving a block: one reservation at a time, run as its own task, its outcome shared by
//! every caller that waits on it.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use super::Shared;
use super::state::{Block, Reservation};
use crate::arith::Run;
use crate::document::Stamp;
use crate::error::{Error, Result};
use crate::stats::bump;
use crate::strategy::Drawer;

/// A reservation marked in flight, owned by the future that runs it: dropped before it
/// finished (never started because no runtime could run it, its runtime shut down, or the
/// caller running it inline was cancelled), it clears `inflight` and wakes the waiters, who
/// then start another; whatever it may have reserved is a gap.
struct InflightGuard {
    shared: Arc<Shared>,
    reservation: Arc<Reservation>,
    armed: bool,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if self.armed {
            {
                // Under the lock: a reservation begun after this one ended sets it again.
                let mut st = self.shared.lock();
                st.end(&self.reservation);
                self.shared.reserving.store(false, Relaxed);
            }
            self.shared.done.notify_waiters();
        }
    }
}

/// Runs one reservation: draws a block and leaves it in `next`, or its error in its outcome
/// for the callers that waited on it.
async fn reserve(mut guard: InflightGuard, size: u64) {
    let result = reserve_run(&guard.shared.drawer, size, guard.shared.options.range_share).await;
    let shared = &guard.shared;
    {
        let mut st = shared.lock();
        st.end(&guard.reservation);
        // Under the lock: a reservation begun after this one ended sets it again.
        shared.reserving.store(false, Relaxed);
        let outcome = match result {
            Ok((run, version)) => {
                st.measured(std::time::Instant::now());
                bump(&shared.drawer.stats.block_refills);
                debug_assert!(st.next.is_none(), "one reservation at a time");
                st.next = Some(Block::new(run, version));
                Ok(())
            }
            Err(e) => {
                tracing::debug!(
                    sequence = %shared.drawer.name,
                    error = %e,
                    "block reservation failed: its waiters get the error, the next call reserves afresh"
                );
                if let Some(b) = st.current.as_mut() {
                    b.prefetch_failed = true;
                }
                Err(e)
            }
        };
        // Only this task sets it, once.
        let _ = guard.reservation.outcome.set(outcome);
    }
    guard.armed = false;
    shared.done.notify_waiters();
}

/// Draws a block of `size`, within the range share; near the bound of a non-cyclic
/// sequence, what is left.
async fn reserve_run(drawer: &Drawer, size: u64, share: Option<f64>) -> Result<(Run, Stamp)> {
    match drawer.draw_versioned(size, share).await {
        Err(Error::Exhausted { remaining, .. }) if remaining > 0 && remaining < size => {
            drawer.draw_versioned(remaining, share).await
        }
        other => other,
    }
}

/// Starts reservation `r` (already marked in flight) in the background on the current tokio
/// runtime. Outside any runtime nothing can be spawned: returns it to be run inline by a
/// caller that waits for it anyway, or dropped (which clears `inflight`). Boxed: a database
/// write's future is large, and the caller's future would hold it inline otherwise (every
/// `next` future as large), for a path taken only outside a tokio runtime.
pub(super) fn start(
    shared: &Arc<Shared>,
    r: Arc<Reservation>,
    size: u64,
) -> Option<Pin<Box<dyn Future<Output = ()> + Send>>> {
    shared.reserving.store(true, Relaxed);
    let run = reserve(
        InflightGuard {
            shared: Arc::clone(shared),
            reservation: r,
            armed: true,
        },
        size,
    );
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            drop(handle.spawn(run));
            None
        }
        Err(_) => Some(Box::pin(run)),
    }
}
