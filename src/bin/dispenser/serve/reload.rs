//! SIGHUP: the service reads again
//!
//! - its certificate and key (`--tls-cert`, `--tls-key`, `--tls-client-ca`), for the
//!   connections it accepts from then on; connections already open keep theirs;
//! - its tokens file (`--tokens`): a token removed (or changed) is refused from the next
//!   request on and its board streams end; the other tokens, their streams and every block
//!   client go on untouched. Tokens given in `DISPENSER_TOKENS` cannot change while the
//!   process runs (a process's environment is fixed at its start).
//!
//! Each is read as a whole and put in use only if it loads; otherwise one line on stderr
//! says why and what was in use stays. What loads but is wrong — a certificate expired or not
//! valid yet, a key or tokens file other users may read — is put in use with a warning, as at
//! start.

use std::path::PathBuf;
use std::sync::Arc;

use super::scrape::MetricsToken;
use super::state::Shared;
use super::tls::Tls;
use super::tokens::{load_tokens, tokens_warnings};

/// What a SIGHUP reads again.
pub(super) struct Reloadable {
    pub(super) tls: Option<Arc<Tls>>,
    pub(super) state: Shared,
    /// `--tokens` (`None`: the tokens came from `DISPENSER_TOKENS`).
    pub(super) tokens: Option<PathBuf>,
    /// A new tokens file must not hold the metrics token.
    pub(super) metrics_token: MetricsToken,
}

/// Starts listening for SIGHUP (before the service says it listens, so that a SIGHUP sent
/// as soon as it does reloads rather than stops it, the signal's default).
#[cfg(unix)]
pub(super) fn listen() -> Option<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("dispenser: cannot listen for SIGHUP (no reloads): {e}");
            None
        }
    }
}

/// Reloads on every SIGHUP, until the service stops (the task is aborted then).
#[cfg(unix)]
pub(super) async fn on_hangup(mut hangups: tokio::signal::unix::Signal, what: Reloadable) {
    while hangups.recv().await.is_some() {
        reload(&what);
    }
}

/// One reload: one line on stderr for each thing read again, saying what happened.
fn reload(what: &Reloadable) {
    if let Some(tls) = &what.tls {
        match tls.reload() {
            Ok(warnings) => {
                eprintln!(
                    "dispenser: SIGHUP: TLS reloaded ({}); new connections get it",
                    tls.describe()
                );
                for w in warnings {
                    eprintln!("dispenser: SIGHUP: warning: {w}");
                }
            }
            Err(e) => eprintln!(
                "dispenser: SIGHUP: TLS not reloaded, the previous certificate stays in use: {e}"
            ),
        }
    }
    match &what.tokens {
        None => eprintln!(
            "dispenser: SIGHUP: tokens not reloaded: they come from DISPENSER_TOKENS, which cannot change while the service runs (give them with --tokens FILE to reload them)"
        ),
        Some(path) => match load_tokens(Some(path)) {
            Err(e) => eprintln!(
                "dispenser: SIGHUP: tokens not reloaded, the previous tokens stay in use: {e}"
            ),
            Ok(rules) => {
                // Looked at before the new tokens are put in use.
                let warnings = tokens_warnings(Some(path));
                if let Some(name) = what.metrics_token.shared_with(&rules) {
                    eprintln!(
                        "dispenser: SIGHUP: tokens not reloaded, the previous tokens stay in use: token {name:?} of {} is the metrics token; give /metrics a token of its own",
                        path.display()
                    );
                    return;
                }
                let r = what.state.tokens.replace(rules);
                eprintln!(
                    "dispenser: SIGHUP: tokens reloaded from {}: {} kept, {} added {:?}, {} removed {:?} (refused from now on, their streams end)",
                    path.display(),
                    r.kept.len(),
                    r.added.len(),
                    r.added,
                    r.removed.len(),
                    r.removed
                );
                for w in warnings {
                    eprintln!("dispenser: SIGHUP: warning: {w}");
                }
            }
        },
    }
}
