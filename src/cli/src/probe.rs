//! A refused connection (or a host name that does not exist) reported at once: the driver's
//! server selection waits its whole timeout even when every host has already refused the
//! connection, so the command races a name lookup and a plain TCP connect to each host of the
//! URI. Only when every host is dead — it refuses the connection, or its name does not exist
//! — does the probe end the command; a host that accepts, or answers slowly, or whose name
//! lookup fails temporarily leaves the operation to the driver and its timeouts (a slow but
//! live server is not cut short).

use std::io;

use dispenser::Error;
use dispenser::mongodb::options::{ClientOptions, ServerAddress};

/// What an unreachable server should make the user check.
pub const HINT: &str = "is the server running and MONGODB_URI (or --uri) right? In a clone of \
     dispenser, start a local one with `export \"$(scripts/server.sh start)\"`";

/// Why a host can certainly not be reached.
#[derive(Clone, Copy, PartialEq)]
enum Dead {
    Refused,
    NoSuchHost,
}

impl Dead {
    fn says(self) -> &'static str {
        match self {
            Dead::Refused => "connection refused",
            Dead::NoSuchHost => "its name does not resolve",
        }
    }
}

/// Whether `host:port` is certainly unreachable, and why; `None` when it may be alive.
async fn dead(host: &str, port: u16) -> Option<Dead> {
    let addrs: Vec<_> = match tokio::net::lookup_host((host, port)).await {
        Ok(addrs) => addrs.collect(),
        // "Temporary failure in name resolution" may pass: the driver's timeouts decide.
        Err(e) if e.to_string().to_lowercase().contains("temporar") => return None,
        Err(_) => return Some(Dead::NoSuchHost),
    };
    if addrs.is_empty() {
        return Some(Dead::NoSuchHost);
    }
    match tokio::net::TcpStream::connect(&addrs[..]).await {
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Some(Dead::Refused),
        _ => None,
    }
}

/// Resolves to an error when every host of `uri` is dead (refuses a TCP connection, or has a
/// name that does not exist); else never.
///
/// The URI is parsed without DNS SRV lookups (a `mongodb+srv://` URI, a Unix socket or an
/// unparsable URI is left to the driver: the probe then never resolves).
pub async fn refused(uri: &str) -> Error {
    if let Some(hosts) = tcp_hosts(uri).await {
        let tries = hosts.iter().map(|(h, p)| dead(h, *p));
        let results = futures::future::join_all(tries).await;
        let all_dead: Option<Vec<Dead>> = results.into_iter().collect();
        if let Some(why) = all_dead.filter(|w| !w.is_empty()) {
            let shown: Vec<String> = hosts.iter().map(|(h, p)| format!("{h}:{p}")).collect();
            let (context, cause, kind) = if why.iter().all(|w| *w == why[0]) {
                let kind = match why[0] {
                    Dead::Refused => io::ErrorKind::ConnectionRefused,
                    Dead::NoSuchHost => io::ErrorKind::NotFound,
                };
                (shown.join(", "), why[0].says().to_owned(), kind)
            } else {
                let each: Vec<String> = shown
                    .iter()
                    .zip(&why)
                    .map(|(h, w)| format!("{h} ({})", w.says()))
                    .collect();
                (
                    each.join(", "),
                    "no host reachable".to_owned(),
                    io::ErrorKind::ConnectionRefused,
                )
            };
            return Error::Database {
                context: format!("connecting to {context}"),
                source: dispenser::mongodb::error::Error::from(io::Error::new(kind, cause)),
                written: dispenser::error::Written::Nothing,
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
