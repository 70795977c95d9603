//! SIGHUP: the service reads its certificate and key again (`--tls-cert`, `--tls-key`,
//! `--tls-client-ca`) for the connections it accepts from then on; connections already open
//! keep theirs. What does not load is refused with one line on stderr, and what was in use is
//! kept.

use std::sync::Arc;

use super::tls::Tls;

/// Reloads on every SIGHUP, until the service stops (the task is aborted then).
#[cfg(unix)]
pub(super) async fn on_hangup(tls: Option<Arc<Tls>>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("dispenser: cannot listen for SIGHUP (no reloads): {e}");
            return;
        }
    };
    while hangups.recv().await.is_some() {
        reload(tls.as_deref());
    }
}

/// One reload: one line on stderr for each thing read again, saying what happened.
fn reload(tls: Option<&Tls>) {
    if let Some(tls) = tls {
        match tls.reload() {
            Ok(()) => eprintln!(
                "dispenser: SIGHUP: TLS reloaded ({}); new connections get it",
                tls.describe()
            ),
            Err(e) => eprintln!(
                "dispenser: SIGHUP: TLS not reloaded, the previous certificate stays in use: {e}"
            ),
        }
    }
}
