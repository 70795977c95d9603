//! A refused connection reported at once: the driver's server selection waits its whole
//! timeout even when every host has already refused the connection, so the command races a
//! plain TCP connect to each host of the URI. Only when every host refuses does the probe
//! end the command; a host that accepts, or answers slowly, or cannot be resolved leaves the
//! operation to the driver and its timeouts (a slow but live server is not cut short).

use std::io;

use dispenser::Error;
use dispenser::mongodb::options::{ClientOptions, ServerAddress};

/// What an unreachable server should make the user check.
pub const HINT: &str = "is the server running and MONGODB_URI (or --uri) right? In a clone of \
     dispenser, start a local one with `export \"$(scripts/server.sh start)\"`";

/// Resolves to an error when every host of `uri` refuses a TCP connection; else never.
///
/// The URI is parsed without DNS SRV lookups (a `mongodb+srv://` URI, a Unix socket or an
/// unparsable URI is left to the driver: the probe then never resolves).
pub async fn refused(uri: &str) -> Error {
    if let Some(hosts) = tcp_hosts(uri).await {
        let tries = hosts.iter().map(|(h, p)| async move {
            tokio::net::TcpStream::connect((h.as_str(), *p))
                .await
                .err()
                .filter(|e| e.kind() == io::ErrorKind::ConnectionRefused)
        });
        let results = futures::future::join_all(tries).await;
        if !results.is_empty() && results.iter().all(Option::is_some) {
            let shown: Vec<String> = hosts.iter().map(|(h, p)| format!("{h}:{p}")).collect();
            let cause = io::Error::new(io::ErrorKind::ConnectionRefused, "connection refused");
            return Error::Database {
                context: format!("connecting to {}", shown.join(", ")),
                source: dispenser::mongodb::error::Error::from(cause),
            };
        }
    }
    std::future::pending().await
}

/// The hosts of a `mongodb://` URI (never its credentials).
async fn tcp_hosts(uri: &str) -> Option<Vec<(String, u16)>> {
    if !uri.starts_with("mongodb://") {
        return None;
    }
    let options = ClientOptions::parse(uri).await.ok()?;
    options
        .hosts
        .iter()
        .map(|h| match h {
            ServerAddress::Tcp { host, port } => Some((host.clone(), port.unwrap_or(27017))),
            _ => None,
        })
        .collect()
}
