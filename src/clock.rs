//! The server's clock, as a client can know it: what time it is for every client of one
//! deployment, whatever the client machine's own clock says.
//!
//! Rules that depend on the time of day and are shared by many clients — a daily queue's new
//! day, how long a queue take's request id is remembered — must not follow the clock of
//! whichever client writes next: one client whose clock is a day ahead would start tomorrow
//! for everyone, or forget every request id. So they read this clock instead: the server's
//! `localTime` (from `hello`, or the older `isMaster` for servers that lack it) measured at
//! most [`REFRESH`] ago, plus the time elapsed since on this process's **monotonic** clock
//! (which a change of the machine's wall clock does not move). The error is about half a
//! round trip plus the monotonic clock's drift over [`REFRESH`]: milliseconds.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bson::{Bson, doc};
use mongodb::Database;

use crate::error::{Error, Result};

/// How long one reading of the server's clock is used before it is read again.
pub(crate) const REFRESH: Duration = Duration::from_secs(60);

/// One reading: the server's time (ms since the epoch) at a local instant.
#[derive(Clone, Copy, Debug)]
struct Reading {
    server_ms: i64,
    at: Instant,
}

impl Reading {
    fn now_ms(&self, now: Instant) -> i64 {
        let elapsed = now.saturating_duration_since(self.at);
        self.server_ms
            .saturating_add(i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
    }
}

/// The server's clock, shared by every handle of one dispenser (one reading a minute).
#[derive(Debug, Default)]
pub(crate) struct ServerClock {
    last: Mutex<Option<Reading>>,
    /// One reading at a time: callers that find the reading stale wait for the one in flight.
    reading: tokio::sync::Mutex<()>,
}

impl ServerClock {
    fn fresh(&self, now: Instant) -> Option<i64> {
        let last = *self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.filter(|r| now.saturating_duration_since(r.at) < REFRESH)
            .map(|r| r.now_ms(now))
    }

    /// The server's time now, in ms since the epoch: from the last reading when it is
    /// younger than [`REFRESH`], else after one `hello` round trip (bounded by `timeout`).
    ///
    /// # Errors
    ///
    /// [`Error::Database`] or [`Error::Timeout`] when the server cannot be asked; a reply
    /// without `localTime` is an [`Error::InvalidArgument`] naming the server, since no rule
    /// that needs the time may fall back to the client's own clock.
    pub(crate) async fn now_ms(&self, db: &Database, timeout: Duration) -> Result<i64> {
        if let Some(ms) = self.fresh(Instant::now()) {
            return Ok(ms);
        }
        let _one = self.reading.lock().await;
        if let Some(ms) = self.fresh(Instant::now()) {
            return Ok(ms);
        }
        let reading = read(db, timeout).await?;
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(reading);
        Ok(reading.now_ms(Instant::now()))
    }
}

/// One reading of the server's `localTime`, stamped at the middle of the round trip.
async fn read(db: &Database, timeout: Duration) -> Result<Reading> {
    let context = || "reading the server's clock (hello)".to_owned();
    let mut reply = None;
    for command in ["hello", "isMaster"] {
        let sent = Instant::now();
        match tokio::time::timeout(timeout, db.run_command(doc! { command: 1 })).await {
            Err(_) => {
                return Err(Error::timeout(
                    context(),
                    timeout,
                    crate::error::Aftermath::Read,
                ));
            }
            Ok(Ok(r)) => {
                let back = Instant::now();
                reply = Some((r, sent + back.saturating_duration_since(sent) / 2));
                break;
            }
            // A server that does not know `hello` (older ones, some compatible servers):
            // the older name of the same command.
            Ok(Err(e)) if command == "hello" => {
                tracing::debug!("hello refused ({e}); asking isMaster");
            }
            Ok(Err(e)) => return Err(Error::database(context(), e)),
        }
    }
    let Some((r, at)) = reply else {
        return Err(Error::invalid_argument(
            "server",
            "answered neither hello nor isMaster",
        ));
    };
    match r.get("localTime") {
        Some(Bson::DateTime(t)) => Ok(Reading {
            server_ms: t.timestamp_millis(),
            at,
        }),
        _ => Err(Error::invalid_argument(
            "server",
            "its hello reply has no localTime, so the time of a daily queue's day and of request ids cannot be read from it",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_moves_with_the_monotonic_clock_and_expires() {
        let at = Instant::now();
        let r = Reading {
            server_ms: 1_000_000,
            at,
        };
        assert_eq!(r.now_ms(at), 1_000_000);
        assert_eq!(r.now_ms(at + Duration::from_millis(1500)), 1_001_500);
        // An instant before the reading (clocks of two threads) never goes back.
        assert_eq!(r.now_ms(at - Duration::from_millis(5)), 1_000_000);
        let c = ServerClock::default();
        *c.last.lock().unwrap() = Some(r);
        assert_eq!(c.fresh(at + Duration::from_secs(1)), Some(1_001_000));
        assert_eq!(c.fresh(at + REFRESH), None, "a reading older than REFRESH");
    }
}
