//! `dispenser serve`: the HTTP service (`dispenser-server`) with its settings from the
//! command line ([`ServeArgs`], turned into a [`Config`]), stopped by SIGTERM or SIGINT,
//! reloading its tokens file and TLS files on SIGHUP.

use std::net::SocketAddr;
use std::time::Duration;

use dispenser::{Dispenser, Error};
use dispenser_server::{Config, Server, Service};

use crate::args::{MAX_BLOCK, MAX_COUNT, parse_share, parse_timeout, whole};
use crate::exit::Outcome;

// The stream caps' defaults, as `dispenser_server::Config`'s.
const STREAMS_PER_TOKEN: usize = 16;
const STREAMS_PER_QUEUE: usize = 64;
const TICKET_STREAMS_PER_ADDRESS: usize = 250;
const TICKET_STREAMS_PER_QUEUE: usize = 2000;

/// `dispenser serve`.
#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the first line on stdout says which).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// JSON file with the tokens (else the environment variable DISPENSER_TOKENS holds the
    /// JSON): {"tokens": [{"name", "token", "sequences": [globs], "operations": [...]}]}.
    /// SIGHUP reads the file again (tokens in DISPENSER_TOKENS cannot change).
    #[arg(long)]
    pub tokens: Option<std::path::PathBuf>,
    /// The starting block size of the block client each sequence is served through (blocks
    /// grow to keep ahead of fast callers, up to --max-block).
    #[arg(long, default_value_t = 1000, value_parser = whole::<u64>(1, MAX_BLOCK), allow_negative_numbers = true)]
    pub block: u64,
    /// The largest block a sequence's client may reserve (what a crash of the service can
    /// burn, twice: the current block and the prefetched one); at least --block.
    #[arg(long, default_value_t = 100_000, value_parser = whole::<u64>(1, MAX_BLOCK), allow_negative_numbers = true)]
    pub max_block: u64,
    /// The largest share of the numbers left before a sequence's bound (of one cycle, for a
    /// cyclic sequence) that one block may hold (0 < share ≤ 1; at least one number).
    #[arg(long, default_value_t = 0.01, value_parser = parse_share, allow_negative_numbers = true)]
    pub block_share: f64,
    /// Reserve the next block in the background once this share of the current one is used.
    #[arg(long, default_value_t = 0.5, value_parser = parse_share, allow_negative_numbers = true)]
    pub prefetch: f64,
    /// Seconds a sequence's block client may go without a draw before the service closes
    /// it and gives back the numbers it holds (0: never). The next draw opens a fresh one.
    #[arg(long, default_value_t = 300.0, value_parser = parse_idle_release, allow_negative_numbers = true)]
    pub block_idle_release: f64,
    /// The largest count one request may ask for.
    #[arg(long, default_value_t = 100_000, value_parser = whole::<u64>(1, MAX_COUNT), allow_negative_numbers = true)]
    pub max_count: u64,
    /// Seconds a request may take before it is answered 503 `timeout` (a draw cut short is a
    /// gap, never a duplicate), or 408 `request_timeout` when its body had not arrived.
    #[arg(long, default_value_t = 30.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub request_timeout: f64,
    /// Seconds a request head may take to arrive: on a new connection from its start, on a
    /// kept-alive one from the request's first byte. A connection past it is closed.
    #[arg(long, default_value_t = 10.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub header_timeout: f64,
    /// Seconds a kept-alive connection may wait for its next request before it is closed,
    /// once a request on it carried a valid token.
    #[arg(long, default_value_t = 60.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub idle_timeout: f64,
    /// Seconds a connection may wait for a request until one of its requests carried a valid
    /// token (a new connection's first byte included); at most --idle-timeout.
    #[arg(long, default_value_t = 5.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub unauthenticated_idle_timeout: f64,
    /// Connections open at once [default: 10000, or what the open-file limit allows less
    /// 128]. At the cap, a connection waiting for a request is closed to make room for a new
    /// one (first those that never sent a valid token, the longest waiting first); new ones
    /// wait only while every connection is serving a request or stream.
    #[arg(long, value_parser = whole::<u64>(1, 1_000_000), allow_negative_numbers = true)]
    pub max_connections: Option<u64>,
    /// Board event streams (GET /ui/queues/{name}/events) one token may hold open at once;
    /// one more is answered 429 `too_many_streams`.
    #[arg(long, default_value_t = STREAMS_PER_TOKEN, value_parser = whole::<usize>(1, 1_000_000), allow_negative_numbers = true)]
    pub max_streams_per_token: usize,
    /// Board event streams open at once on one queue; one more is answered 503
    /// `too_many_streams` (as is one past half of --max-connections, the most streams take).
    #[arg(long, default_value_t = STREAMS_PER_QUEUE, value_parser = whole::<usize>(1, 1_000_000), allow_negative_numbers = true)]
    pub max_streams_per_queue: usize,
    /// Ticket streams (GET /ui/queues/{name}/tickets/{serial}/events: the phones following
    /// their tickets) open at once from one client address; one more is answered 429
    /// `too_many_streams` (the page then looks every few seconds instead).
    #[arg(long, default_value_t = TICKET_STREAMS_PER_ADDRESS, value_parser = whole::<usize>(1, 1_000_000), allow_negative_numbers = true)]
    pub max_ticket_streams_per_address: usize,
    /// Ticket streams open at once on one queue; one more is answered 503 `too_many_streams`
    /// (as is one past a quarter of --max-connections, the most ticket streams take: apart
    /// from the boards' half).
    #[arg(long, default_value_t = TICKET_STREAMS_PER_QUEUE, value_parser = whole::<usize>(1, 1_000_000), allow_negative_numbers = true)]
    pub max_ticket_streams_per_queue: usize,
    /// The service's address as people's phones reach it (`https://tickets.example.org`): the
    /// start of the ticket links the board and the kiosk show as QR codes. Default: the
    /// address the board or kiosk itself reached the service at.
    #[arg(long, value_name = "URL", value_parser = parse_public_url)]
    pub public_url: Option<String>,
    /// The most sequences with series of their own on /metrics: those this service drew
    /// from, the most used first (0: none; the totals always count every sequence).
    #[arg(long, default_value_t = 1000, value_parser = whole::<usize>(0, 1_000_000), allow_negative_numbers = true)]
    pub metrics_max_sequences: usize,
    /// A token /metrics then requires (`Authorization: Bearer <it>`, 16 to 256 bytes, not an
    /// API token); without it /metrics needs none. Prefer the environment variable: a
    /// command line is visible to other users.
    #[arg(long, env = "DISPENSER_METRICS_TOKEN", hide_env_values = true, value_parser = secret)]
    pub metrics_token: Option<Secret>,
    /// Serve HTTPS only, with this certificate chain (PEM, the server's certificate first);
    /// needs --tls-key. SIGHUP reads it again for new connections.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The private key of --tls-cert (PEM). SIGHUP reads it again.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Require a client certificate issued by one of these authorities (PEM), in addition
    /// to a token; needs --tls-cert. SIGHUP reads it again.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<std::path::PathBuf>,
}

/// `--block-idle-release`: 0 (never) or a number of seconds up to a day.
fn parse_idle_release(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(v.is_finite() && (0.0..=86_400.0).contains(&v)) {
        return Err(format!(
            "{s} must be 0 (never) or a number of seconds up to 86400"
        ));
    }
    Ok(v)
}

/// `--public-url`: `http://` or `https://`, a host, maybe a port and a path; no query or
/// fragment; at most 200 characters. The final `/` is dropped.
fn parse_public_url(s: &str) -> Result<String, String> {
    dispenser_server::check_public_url(s)
}

/// A secret from the command line or the environment, never shown (`Debug` hides it).
#[derive(Clone)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// Never fails: a secret is checked after parsing, where the error cannot echo it.
fn secret(s: &str) -> Result<Secret, String> {
    Ok(Secret(s.to_owned()))
}

/// The stop signals (SIGTERM, SIGINT), registered when this is called — before the service
/// says it listens — so a signal sent as soon as the address is printed stops it gracefully
/// instead of taking the signal's default action (the process killed, its block clients'
/// numbers lost as a gap). The future ends at the first of them.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        let term = signal(SignalKind::terminate()).ok();
        let interrupt = signal(SignalKind::interrupt()).ok();
        let wait = |s: Option<Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        async move {
            tokio::select! {
                () = wait(term) => {},
                () = wait(interrupt) => {},
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

impl ServeArgs {
    /// The service's settings: the tokens from `--tokens`, else `DISPENSER_TOKENS`.
    pub fn config(&self, uri: &str) -> dispenser::Result<Config> {
        let config = self.settings(uri)?;
        Ok(match &self.tokens {
            Some(path) => config.with_tokens_file(path),
            None => config.with_tokens_json(std::env::var("DISPENSER_TOKENS").map_err(|_| {
                Error::InvalidArgument {
                    what: "tokens".into(),
                    reason:
                        "no tokens configured: pass --tokens FILE or set DISPENSER_TOKENS (JSON)"
                            .into(),
                }
            })?),
        })
    }

    /// The service's settings but the tokens.
    fn settings(&self, uri: &str) -> dispenser::Result<Config> {
        if self.max_block < self.block {
            return Err(Error::InvalidArgument {
                what: "--max-block".into(),
                reason: format!(
                    "{} is below --block {}: the largest block must be at least the starting one",
                    self.max_block, self.block
                ),
            });
        }
        let listen: SocketAddr = self.listen.parse().map_err(|e| Error::InvalidArgument {
            what: "--listen".into(),
            reason: format!(
                "{:?} is not an address such as 127.0.0.1:8080: {e}",
                self.listen
            ),
        })?;
        let mut config = Config::default()
            .with_database_uri(uri)
            .with_listen(listen)
            .with_block(self.block)
            .with_max_block(self.max_block)
            .with_block_share(self.block_share)
            .with_prefetch(self.prefetch)
            .with_block_idle_release(
                (self.block_idle_release > 0.0)
                    .then(|| Duration::from_secs_f64(self.block_idle_release)),
            )
            .with_max_count(self.max_count)
            .with_request_timeout(Duration::from_secs_f64(self.request_timeout))
            .with_header_timeout(Duration::from_secs_f64(self.header_timeout))
            .with_idle_timeout(Duration::from_secs_f64(self.idle_timeout))
            .with_unauthenticated_idle_timeout(Duration::from_secs_f64(
                self.unauthenticated_idle_timeout,
            ))
            .with_max_connections(self.max_connections)
            .with_max_streams_per_token(self.max_streams_per_token)
            .with_max_streams_per_queue(self.max_streams_per_queue)
            .with_max_ticket_streams_per_address(self.max_ticket_streams_per_address)
            .with_max_ticket_streams_per_queue(self.max_ticket_streams_per_queue)
            .with_public_url(self.public_url.clone())
            .with_metrics_max_sequences(self.metrics_max_sequences)
            .with_metrics_token(self.metrics_token.as_ref().map(|s| s.0.clone()));
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            config = config.with_tls(cert, key, self.tls_client_ca.clone());
        }
        Ok(config)
    }
}

/// The service's error, naming the flag of the setting at fault (`max_connections` →
/// `--max-connections`).
pub fn flag_of(e: Error) -> Error {
    let Error::InvalidArgument { what, reason } = e else {
        return e;
    };
    let flag = match what.as_str() {
        "tokens_file" => "--tokens",
        "metrics_token" => "--metrics-token (or DISPENSER_METRICS_TOKEN)",
        "tokens" | "runtime" => return Error::InvalidArgument { what, reason },
        flag if flag.starts_with('-') => return Error::InvalidArgument { what, reason },
        setting => {
            return Error::InvalidArgument {
                what: format!("--{}", setting.replace('_', "-")),
                reason,
            };
        }
    };
    Error::InvalidArgument {
        what: flag.into(),
        reason,
    }
}

/// The service of `args` over `dispenser`, bound (`dispenser serve`, and `bench --http`,
/// which starts one in its own process), its warnings printed. `tokens` is the tokens
/// document itself, or `None` to read them as `dispenser serve` does.
pub async fn bind(
    dispenser: Dispenser,
    args: &ServeArgs,
    uri: &str,
    tokens: Option<&str>,
) -> dispenser::Result<Service> {
    let config = match tokens {
        Some(text) => args.settings(uri)?.with_tokens_json(text),
        None => args.config(uri)?,
    };
    let server = Server::new(dispenser, config).map_err(flag_of)?;
    // Served all the same, but said at once (as ssh says of a key open to others).
    for w in server.warnings() {
        eprintln!("dispenser: warning: {w}");
    }
    Service::bind(server).await.map_err(flag_of)
}

/// The service's end, as `dispenser serve` tells it: what was given back, any loss, a
/// listener that failed.
pub fn told(served: dispenser_server::Served) -> Outcome {
    let r = &served.returned;
    for failure in &r.failures {
        eprintln!("dispenser: {failure}");
    }
    // A loss is named only when there is one ("0 lost (a gap)" read as if something were).
    let lost = if r.lost > 0 {
        format!(
            ", {} number(s) lost (a gap: reserved, never issued)",
            r.lost
        )
    } else {
        String::new()
    };
    eprintln!(
        "dispenser: stopped; {} unused number(s) given back{lost}",
        r.given_back
    );
    // A failure of the listener while serving is not the caller's input (exit 2): it is
    // told as it is, and the command exits 1 (unexpected).
    if let Some(e) = &served.listener_error {
        eprintln!("dispenser: the server stopped on an error of its listener: {e}");
        return Outcome::Exit(crate::exit::OTHER);
    }
    Outcome::Done
}

/// Entry point of `dispenser serve`.
///
/// `uri` is the database URI the dispenser was connected with, only to scrub its password
/// from error answers.
pub async fn run(dispenser: Dispenser, args: ServeArgs, uri: &str) -> dispenser::Result<Outcome> {
    let service = bind(dispenser, &args, uri, None).await?;
    #[cfg(unix)]
    let reloads = hangups().map(|mut hangups| {
        let reloader = service.reloader();
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                for line in reloader.reload_with(flag_of) {
                    eprintln!("dispenser: SIGHUP: {line}");
                }
            }
        })
    });
    let stop = shutdown_signal();
    println!("listening on {}", service.url());
    let served = service.serve(stop).await;
    #[cfg(unix)]
    if let Some(task) = reloads {
        task.abort();
    }
    Ok(told(served))
}

/// Starts listening for SIGHUP (before the service says it listens, so that a SIGHUP sent
/// as soon as it does reloads rather than stops it, the signal's default).
#[cfg(unix)]
fn hangups() -> Option<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("dispenser: cannot listen for SIGHUP (no reloads): {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_services_settings_are_named_by_their_flags() {
        let named = |what: &str| match flag_of(Error::InvalidArgument {
            what: what.into(),
            reason: "r".into(),
        }) {
            Error::InvalidArgument { what, .. } => what,
            other => panic!("{other:?}"),
        };
        assert_eq!(named("max_connections"), "--max-connections");
        assert_eq!(named("tls_client_ca"), "--tls-client-ca");
        assert_eq!(named("tokens_file"), "--tokens");
        assert_eq!(
            named("metrics_token"),
            "--metrics-token (or DISPENSER_METRICS_TOKEN)"
        );
        assert_eq!(named("tokens"), "tokens");
        assert_eq!(named("--listen"), "--listen");
    }

    /// The flags' defaults are the service's: a `dispenser serve` without flags makes the
    /// service `Config::default()` describes.
    #[test]
    fn the_flags_defaults_make_the_services_default_settings() {
        #[derive(clap::Parser)]
        struct Serve {
            #[command(flatten)]
            args: ServeArgs,
        }
        let args = <Serve as clap::Parser>::try_parse_from(["serve", "--tokens", "t.json"])
            .unwrap()
            .args;
        let from_flags = format!("{:?}", args.config("").unwrap());
        let default = format!("{:?}", Config::default().with_tokens_file("t.json"));
        assert_eq!(from_flags, default);
    }
}
