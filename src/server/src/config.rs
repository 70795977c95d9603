//! The service's settings: [`Config`], a plain value with safe defaults, checked when a
//! [`Server`](crate::Server) is made from it.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use dispenser::Error;

use crate::queue_state::{
    STREAMS_PER_QUEUE, STREAMS_PER_TOKEN, TICKET_STREAMS_PER_ADDRESS, TICKET_STREAMS_PER_QUEUE,
};

/// The largest block a sequence's block client may reserve.
pub const MAX_BLOCK: u64 = 10_000_000;
/// The largest `max_count` (numbers one request may ask for).
pub const MAX_COUNT: u64 = 100_000_000;

/// Where the tokens come from.
#[derive(Clone)]
pub(crate) enum TokenSource {
    /// A file, read at start and again by [`Reloader::reload`](crate::Reloader::reload).
    File(PathBuf),
    /// The JSON document itself (it cannot be read again).
    Json(String),
}

/// The settings of a [`Server`](crate::Server) and of the [`Service`](crate::Service) that
/// serves it. Every setting has a safe default, stated on its setter; the tokens have none
/// and must be given ([`with_tokens_file`](Config::with_tokens_file) or
/// [`with_tokens_json`](Config::with_tokens_json)). [`Server::new`](crate::Server::new)
/// checks them all and names the setting at fault (`max_block`, `listen`, …).
///
/// The connection settings (`listen`, the timeouts of a connection, `max_connections`, TLS)
/// are the [`Service`](crate::Service)'s; a router mounted in an app's own server uses the
/// app's (the stream caps still count against `max_connections`).
///
/// # Default
///
/// No tokens; `listen` 127.0.0.1:8080; blocks of 1000 growing to 100 000, at most 1 % of the
/// numbers left, prefetched at half; block clients closed after 300 s without a draw;
/// `max_count` 100 000; requests cut at 30 s; a request head within 10 s, a kept-alive
/// connection idle at most 60 s (5 s before a valid token); connections capped at 10 000 or
/// what the open-file limit allows less 128; 16 board streams per token, 64 per queue; 250
/// ticket streams per client address, 2000 per queue; no public URL; 1000 sequences with
/// series of their own on `/metrics`, which needs no token; plain HTTP.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use dispenser_server::Config;
///
/// let config = Config::default()
///     .with_tokens_json(r#"{"tokens": []}"#)
///     .with_block(500)
///     .with_request_timeout(Duration::from_secs(10));
/// # let _ = config;
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Config {
    pub(crate) tokens: Option<TokenSource>,
    pub(crate) database_uri: String,
    pub(crate) listen: SocketAddr,
    pub(crate) block: u64,
    pub(crate) max_block: u64,
    pub(crate) block_share: f64,
    pub(crate) prefetch: f64,
    pub(crate) block_idle_release: Option<Duration>,
    pub(crate) max_count: u64,
    pub(crate) request_timeout: Duration,
    pub(crate) header_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) unauthenticated_idle_timeout: Duration,
    pub(crate) max_connections: Option<u64>,
    pub(crate) max_streams_per_token: usize,
    pub(crate) max_streams_per_queue: usize,
    pub(crate) max_ticket_streams_per_address: usize,
    pub(crate) max_ticket_streams_per_queue: usize,
    pub(crate) public_url: Option<String>,
    pub(crate) metrics_max_sequences: usize,
    pub(crate) metrics_token: Option<String>,
    pub(crate) tls: Option<(PathBuf, PathBuf, Option<PathBuf>)>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tokens: None,
            database_uri: String::new(),
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 8080)),
            block: 1000,
            max_block: 100_000,
            block_share: 0.01,
            prefetch: 0.5,
            block_idle_release: Some(Duration::from_secs(300)),
            max_count: 100_000,
            request_timeout: Duration::from_secs(30),
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            unauthenticated_idle_timeout: Duration::from_secs(5),
            max_connections: None,
            max_streams_per_token: STREAMS_PER_TOKEN,
            max_streams_per_queue: STREAMS_PER_QUEUE,
            max_ticket_streams_per_address: TICKET_STREAMS_PER_ADDRESS,
            max_ticket_streams_per_queue: TICKET_STREAMS_PER_QUEUE,
            public_url: None,
            metrics_max_sequences: 1000,
            metrics_token: None,
            tls: None,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The tokens, the metrics token and the database URI are never shown.
        let tokens = match &self.tokens {
            Some(TokenSource::File(path)) => format!("file {}", path.display()),
            Some(TokenSource::Json(_)) => "JSON".to_owned(),
            None => "none".to_owned(),
        };
        f.debug_struct("Config")
            .field("tokens", &tokens)
            .field("listen", &self.listen)
            .field("block", &self.block)
            .field("max_block", &self.max_block)
            .field("block_share", &self.block_share)
            .field("prefetch", &self.prefetch)
            .field("block_idle_release", &self.block_idle_release)
            .field("max_count", &self.max_count)
            .field("request_timeout", &self.request_timeout)
            .field("header_timeout", &self.header_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field(
                "unauthenticated_idle_timeout",
                &self.unauthenticated_idle_timeout,
            )
            .field("max_connections", &self.max_connections)
            .field("max_streams_per_token", &self.max_streams_per_token)
            .field("max_streams_per_queue", &self.max_streams_per_queue)
            .field(
                "max_ticket_streams_per_address",
                &self.max_ticket_streams_per_address,
            )
            .field(
                "max_ticket_streams_per_queue",
                &self.max_ticket_streams_per_queue,
            )
            .field("public_url", &self.public_url)
            .field("metrics_max_sequences", &self.metrics_max_sequences)
            .field("metrics_token", &self.metrics_token.as_ref().map(|_| "…"))
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// The tokens file (JSON: `{"tokens": [{"name", "token", "sequences": [globs],
    /// "operations": [...]}]}`, the guide's service chapter);
    /// [`Reloader::reload`](crate::Reloader::reload) reads it again. No default: the tokens
    /// must be given.
    #[must_use]
    pub fn with_tokens_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tokens = Some(TokenSource::File(path.into()));
        self
    }

    /// The tokens document itself (as [`with_tokens_file`](Config::with_tokens_file)
    /// reads it); it cannot be reloaded. No default.
    #[must_use]
    pub fn with_tokens_json(mut self, json: impl Into<String>) -> Self {
        self.tokens = Some(TokenSource::Json(json.into()));
        self
    }

    /// The URI the dispenser was connected with, only to scrub its password from error
    /// answers. Defaults to none (the driver's errors do not quote it).
    #[must_use]
    pub fn with_database_uri(mut self, uri: impl Into<String>) -> Self {
        self.database_uri = uri.into();
        self
    }

    /// The address the [`Service`](crate::Service) listens on (port 0 picks a free port).
    /// Defaults to 127.0.0.1:8080.
    #[must_use]
    pub fn with_listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// The starting block size of the block client each sequence is served through (1 to
    /// [`MAX_BLOCK`]; blocks grow to keep ahead of fast callers, up to `max_block`).
    /// Defaults to 1000.
    #[must_use]
    pub fn with_block(mut self, size: u64) -> Self {
        self.block = size;
        self
    }

    /// The largest block a sequence's client may reserve (what a crash can burn, twice); at
    /// least `block`, at most [`MAX_BLOCK`]. Defaults to 100 000.
    #[must_use]
    pub fn with_max_block(mut self, size: u64) -> Self {
        self.max_block = size;
        self
    }

    /// The largest share of the numbers left before a sequence's bound that one block may
    /// hold (more than 0, at most 1). Defaults to 0.01.
    #[must_use]
    pub fn with_block_share(mut self, share: f64) -> Self {
        self.block_share = share;
        self
    }

    /// Reserve the next block in the background once this share of the current one is used
    /// (more than 0, at most 1). Defaults to 0.5.
    #[must_use]
    pub fn with_prefetch(mut self, share: f64) -> Self {
        self.prefetch = share;
        self
    }

    /// How long a sequence's block client may go without a draw before it is closed and what
    /// it holds given back (`None`: never; at most a day). Defaults to 300 s.
    #[must_use]
    pub fn with_block_idle_release(mut self, idle: impl Into<Option<Duration>>) -> Self {
        self.block_idle_release = idle.into();
        self
    }

    /// The largest count one request may ask for (1 to [`MAX_COUNT`]). Defaults to 100 000.
    #[must_use]
    pub fn with_max_count(mut self, count: u64) -> Self {
        self.max_count = count;
        self
    }

    /// How long a request may take before it is answered 503 `timeout` (408
    /// `request_timeout` when its body had not arrived); more than 0, at most an hour.
    /// Defaults to 30 s.
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long a request head may take to arrive ([`Service`](crate::Service) only; more
    /// than 0, at most an hour). Defaults to 10 s.
    #[must_use]
    pub fn with_header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// How long a kept-alive connection may wait for its next request once a request on it
    /// carried a valid token ([`Service`](crate::Service) only; more than 0, at most an
    /// hour). Defaults to 60 s.
    #[must_use]
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// How long a connection may wait for a request until one of its requests carried a
    /// valid token ([`Service`](crate::Service) only; more than 0, at most the idle
    /// timeout, which caps it). Defaults to 5 s.
    #[must_use]
    pub fn with_unauthenticated_idle_timeout(mut self, timeout: Duration) -> Self {
        self.unauthenticated_idle_timeout = timeout;
        self
    }

    /// Connections open at once (1 to 1 000 000; within the open-file limit less 128). The
    /// [`Service`](crate::Service) caps its connections at it; the event streams of a
    /// mounted router are capped at a half (boards) and a quarter (tickets) of it too.
    /// Defaults to 10 000, or what the open-file limit allows less 128.
    #[must_use]
    pub fn with_max_connections(mut self, max: impl Into<Option<u64>>) -> Self {
        self.max_connections = max.into();
        self
    }

    /// Board event streams one token may hold open at once (at least 1). Defaults to 16.
    #[must_use]
    pub fn with_max_streams_per_token(mut self, max: usize) -> Self {
        self.max_streams_per_token = max;
        self
    }

    /// Board event streams open at once on one queue (at least 1). Defaults to 64.
    #[must_use]
    pub fn with_max_streams_per_queue(mut self, max: usize) -> Self {
        self.max_streams_per_queue = max;
        self
    }

    /// Ticket streams open at once from one client address (at least 1). Defaults to 250.
    /// A mounted router learns the address from axum's `ConnectInfo` (see
    /// [`Server::router`](crate::Server::router)).
    #[must_use]
    pub fn with_max_ticket_streams_per_address(mut self, max: usize) -> Self {
        self.max_ticket_streams_per_address = max;
        self
    }

    /// Ticket streams open at once on one queue (at least 1). Defaults to 2000.
    #[must_use]
    pub fn with_max_ticket_streams_per_queue(mut self, max: usize) -> Self {
        self.max_ticket_streams_per_queue = max;
        self
    }

    /// The app's address as people's phones reach it (`https://tickets.example.org`: `http://`
    /// or `https://`, a host, maybe a port and a path, no query or fragment, at most 200
    /// characters): the start of the ticket links, before the mount prefix. Defaults to none:
    /// the scheme and `Host` the board or kiosk itself came with.
    #[must_use]
    pub fn with_public_url(mut self, url: impl Into<Option<String>>) -> Self {
        self.public_url = url.into();
        self
    }

    /// The most sequences with series of their own on `/metrics` (0: none). Defaults to 1000.
    #[must_use]
    pub fn with_metrics_max_sequences(mut self, max: usize) -> Self {
        self.metrics_max_sequences = max;
        self
    }

    /// A token `/metrics` then requires (16 to 256 bytes, not an API token). Defaults to
    /// none: `/metrics` needs no token.
    #[must_use]
    pub fn with_metrics_token(mut self, token: impl Into<Option<String>>) -> Self {
        self.metrics_token = token.into();
        self
    }

    /// Serve HTTPS only ([`Service`](crate::Service)), with this certificate chain (PEM, the
    /// server's certificate first), its key (PEM), and optionally the authorities client
    /// certificates must chain to. Defaults to plain HTTP.
    #[must_use]
    pub fn with_tls(
        mut self,
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
        client_ca: Option<PathBuf>,
    ) -> Self {
        self.tls = Some((cert.into(), key.into(), client_ca));
        self
    }

    /// Checks every setting; the error names the one at fault.
    pub(crate) fn check(&self) -> Result<(), Error> {
        let bad = |what: &str, reason: String| {
            Err(Error::InvalidArgument {
                what: what.into(),
                reason,
            })
        };
        let share = |v: f64| v.is_finite() && v > 0.0 && v <= 1.0;
        let timeout = |d: Duration| !d.is_zero() && d <= Duration::from_secs(3600);
        if !(1..=MAX_BLOCK).contains(&self.block) {
            return bad(
                "block",
                format!("{} must be from 1 to {MAX_BLOCK}", self.block),
            );
        }
        if self.max_block > MAX_BLOCK {
            return bad(
                "max_block",
                format!("{} must be at most {MAX_BLOCK}", self.max_block),
            );
        }
        if self.max_block < self.block {
            return bad(
                "max_block",
                format!(
                    "{} is below `block` {}: the largest block must be at least the starting one",
                    self.max_block, self.block
                ),
            );
        }
        for (what, v) in [
            ("block_share", self.block_share),
            ("prefetch", self.prefetch),
        ] {
            if !share(v) {
                return bad(what, format!("{v} must be more than 0 and at most 1"));
            }
        }
        if let Some(idle) = self.block_idle_release
            && (idle.is_zero() || idle > Duration::from_secs(86_400))
        {
            return bad(
                "block_idle_release",
                format!("{idle:?} must be more than 0 and at most a day (none: never)"),
            );
        }
        if !(1..=MAX_COUNT).contains(&self.max_count) {
            return bad(
                "max_count",
                format!("{} must be from 1 to {MAX_COUNT}", self.max_count),
            );
        }
        for (what, d) in [
            ("request_timeout", self.request_timeout),
            ("header_timeout", self.header_timeout),
            ("idle_timeout", self.idle_timeout),
            (
                "unauthenticated_idle_timeout",
                self.unauthenticated_idle_timeout,
            ),
        ] {
            if !timeout(d) {
                return bad(
                    what,
                    format!("{d:?} must be more than 0 and at most an hour"),
                );
            }
        }
        if self
            .max_connections
            .is_some_and(|n| !(1..=1_000_000).contains(&n))
        {
            return bad("max_connections", "must be from 1 to 1000000".to_owned());
        }
        for (what, n) in [
            ("max_streams_per_token", self.max_streams_per_token),
            ("max_streams_per_queue", self.max_streams_per_queue),
            (
                "max_ticket_streams_per_address",
                self.max_ticket_streams_per_address,
            ),
            (
                "max_ticket_streams_per_queue",
                self.max_ticket_streams_per_queue,
            ),
        ] {
            if n == 0 {
                return bad(what, "must be at least 1".to_owned());
            }
        }
        if let Some(url) = &self.public_url
            && let Err(reason) = check_public_url(url)
        {
            return bad("public_url", reason);
        }
        Ok(())
    }
}

/// A public URL: `http://` or `https://`, a host, maybe a port and a path; no query or
/// fragment; at most 200 characters. The answer is the URL without its final `/`.
///
/// # Errors
///
/// Why `s` is not one, naming it.
pub fn check_public_url(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .ok_or_else(|| format!("{s:?} must start with https:// or http://"))?;
    let host = rest.split('/').next().unwrap_or("");
    if s.len() > 200 {
        return Err(format!("{s:?} is longer than 200 characters"));
    }
    if host.is_empty()
        || !s
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'?' | b'#' | b'"' | b'<' | b'>'))
    {
        return Err(format!(
            "{s:?} must be a URL such as https://tickets.example.org (a host, maybe a port and a path; no spaces, query or fragment)"
        ));
    }
    Ok(s.trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_pass_and_each_bad_setting_is_named() {
        assert!(Config::default().check().is_ok());
        let named = |c: Config| match c.check() {
            Err(Error::InvalidArgument { what, .. }) => what,
            other => panic!("{other:?}"),
        };
        assert_eq!(named(Config::default().with_block(0)), "block");
        assert_eq!(named(Config::default().with_max_block(10)), "max_block");
        assert_eq!(
            named(Config::default().with_block_share(0.0)),
            "block_share"
        );
        assert_eq!(named(Config::default().with_prefetch(1.5)), "prefetch");
        assert_eq!(
            named(Config::default().with_block_idle_release(Duration::ZERO)),
            "block_idle_release"
        );
        assert_eq!(named(Config::default().with_max_count(0)), "max_count");
        assert_eq!(
            named(Config::default().with_request_timeout(Duration::ZERO)),
            "request_timeout"
        );
        assert_eq!(
            named(Config::default().with_max_connections(0)),
            "max_connections"
        );
        assert_eq!(
            named(Config::default().with_max_streams_per_queue(0)),
            "max_streams_per_queue"
        );
        assert_eq!(
            named(Config::default().with_public_url("ftp://x".to_owned())),
            "public_url"
        );
    }

    #[test]
    fn public_urls_lose_their_final_slash_and_refuse_queries() {
        assert_eq!(
            check_public_url("https://t.example.org/").unwrap(),
            "https://t.example.org"
        );
        assert!(check_public_url("https://t.example.org/?q").is_err());
        assert!(check_public_url("https:///x").is_err());
    }
}
