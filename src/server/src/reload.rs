//! A reload ([`Reloader::reload`](crate::Reloader::reload); `dispenser serve` on SIGHUP): the
//! service reads again
//!
//! - its certificate and key (the settings' TLS files), for the
//!   connections it accepts from then on; connections already open keep theirs;
//! - its tokens file: a token removed (or changed) is refused from the next
//!   request on and its board streams end; the other tokens, their streams and every block
//!   client go on untouched. Tokens given as JSON cannot be read again.
//!
//! Each is read as a whole and put in use only if it loads; otherwise one line of the answer
//! says why and what was in use stays. What loads but is wrong — a certificate expired or not
//! valid yet, a key or tokens file other users may read — is put in use with a warning, as at
//! start.

use std::path::PathBuf;
use std::sync::Arc;

use dispenser::Error;

use super::scrape::MetricsToken;
use super::state::Shared;
use super::tls::Tls;
use super::tokens::{load_tokens, tokens_warnings};

/// What a reload reads again.
pub(super) struct Reloadable {
    pub(super) tls: Option<Arc<Tls>>,
    pub(super) state: Shared,
    /// The tokens file (`None`: the tokens were given as JSON).
    pub(super) tokens: Option<PathBuf>,
    /// A new tokens file must not hold the metrics token.
    pub(super) metrics_token: MetricsToken,
}

/// One reload: one line for each thing read again, saying what happened (`dispenser serve`
/// prints each after `dispenser: SIGHUP: `).
pub(super) fn reload(what: &Reloadable, rename: &dyn Fn(Error) -> Error) -> Vec<String> {
    let mut said = Vec::new();
    if let Some(tls) = &what.tls {
        match tls.reload() {
            Ok(warnings) => {
                said.push(format!(
                    "TLS reloaded ({}); new connections get it",
                    tls.describe()
                ));
                for w in warnings {
                    said.push(format!("warning: {w}"));
                }
            }
            Err(e) => said.push(format!(
                "TLS not reloaded, the previous certificate stays in use: {}",
                rename(e)
            )),
        }
    }
    match &what.tokens {
        None => said.push(
            "tokens not reloaded: they come from DISPENSER_TOKENS, which cannot change while the service runs (give them with --tokens FILE to reload them)".to_owned(),
        ),
        Some(path) => match load_tokens(path) {
            Err(e) => said.push(format!(
                "tokens not reloaded, the previous tokens stay in use: {}",
                rename(e)
            )),
            Ok(rules) => {
                // Looked at before the new tokens are put in use.
                let warnings = tokens_warnings(Some(path));
                if let Some(name) = what.metrics_token.shared_with(&rules) {
                    said.push(format!(
                        "tokens not reloaded, the previous tokens stay in use: token {name:?} of {} is the metrics token; give /metrics a token of its own",
                        path.display()
                    ));
                    return said;
                }
                let r = what.state.tokens.replace(rules);
                said.push(format!(
                    "tokens reloaded from {}: {} kept, {} added {:?}, {} removed {:?} (refused from now on, their streams end)",
                    path.display(),
                    r.kept.len(),
                    r.added.len(),
                    r.added,
                    r.removed.len(),
                    r.removed
                ));
                for w in warnings {
                    said.push(format!("warning: {w}"));
                }
            }
        },
    }
    said
}
