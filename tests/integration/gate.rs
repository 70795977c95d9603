//! The server gate: before any other test trusts the server in `MONGODB_URI`, it must pass
//! `dispenser doctor`'s examination — the same code, [`Dispenser::doctor`], run harder than
//! the command's defaults. It sends the library's own operations and checks their answers,
//! then the concurrency probe: 16 tasks × 500 conditional increments through findAndModify
//! with a projection (8000 acknowledged, 8000 distinct values, final value 8000), 16 tasks
//! collecting 50 compare-and-set wins each (every value stored once), and 16 racing inserts
//! of one `_id` (one insert, the rest duplicate key 11000).

use std::time::Duration;

use dispenser::doctor::{DoctorOptions, Report};
use dispenser::{Dispenser, Options};

use crate::common;

/// The gate's examination: more than doctor's defaults, with time to spare on a loaded
/// machine.
pub fn options() -> DoctorOptions {
    DoctorOptions::default()
        .with_tasks(16)
        .with_increments(500)
        .with_swaps(50)
        .with_time_limit(Duration::from_secs(60))
}

/// Examines the server at `uri` (scratch collection in the test database); `Err` names the
/// server and why it is unfit, or why it could not be examined.
pub async fn verdict(uri: &str, options: DoctorOptions) -> Result<Report, String> {
    let shown = dispenser::error::redact::redact_uri(uri);
    let unreachable = |e: dispenser::Error| {
        format!(
            "cannot examine the server at {shown}: {e} (run the tests with scripts/test.sh, or set MONGODB_URI)"
        )
    };
    let d = Dispenser::connect(uri, Options::default().with_database(common::DB))
        .await
        .map_err(unreachable)?;
    let report = d.doctor().options(options).await.map_err(unreachable)?;
    match report.reason() {
        None => Ok(report),
        Some(why) => Err(format!(
            "the server at {shown} (MongoDB {}{}) is unfit for the library: {why}",
            report.server.version.as_deref().unwrap_or("unknown"),
            report
                .server
                .product
                .as_deref()
                .map(|p| format!(", really {p}"))
                .unwrap_or_default(),
        )),
    }
}

/// The gate itself, run once by [`common::ready`].
pub async fn check() -> Result<(), String> {
    verdict(&common::uri(), options()).await.map(drop)
}

#[tokio::test]
async fn server_is_linearizable_for_the_operations_the_library_uses() {
    common::ready();
}
