//! Keeping credentials out of everything printed: URIs are shown with their password
//! replaced, texts that may quote a URI are scrubbed of the password, and a URI whose
//! password the driver would read differently from us is refused before the driver sees it.
//!
//! # Where the password is
//!
//! The driver (mongodb 3.x, `ConnectionString::parse`) cuts the URI after `scheme://` at the
//! first `?` (the options), takes everything before the **last** `@` of that part as the user
//! info, and splits the user info at its first `:` into user name and password. A password
//! typed raw may hold `/`, `@`, `:`, `#` or `%` (all inside the user info, which the driver
//! then rejects), or `?` (which moves the rest of the password into the options). So the
//! redacted span is wider than the driver's: from the first `:` of the user info to the last
//! `@` of the **whole** URI. That covers the driver's reading and every reading with a raw
//! `?`; at worst it hides an option value holding an `@` too.

pub use crate::error::describe_driver_error;
use crate::error::{Error, Result};

/// The characters that must be percent-encoded in a user name or password (RFC 3986 gen-delims,
/// the driver's list).
const RESERVED: [char; 7] = [':', '/', '?', '#', '[', ']', '@'];

/// The URI with the password of its user info replaced by `***` (see the module docs for
/// where the password is taken to end: the last `@` of the URI, unless that `@` is in an
/// option value such as `?appName=me@corp` after a user info the driver reads as such).
///
/// # Example
///
/// ```
/// use dispenser::error::redact::redact_uri;
///
/// assert_eq!(
///     redact_uri("mongodb://app:s3cret@db1,db2/?tls=true"),
///     "mongodb://app:***@db1,db2/?tls=true"
/// );
/// // A raw '/' or '?' in the password does not end it.
/// assert_eq!(redact_uri("mongodb://app:a/b?c@db1/"), "mongodb://app:***@db1/");
/// assert_eq!(redact_uri("mongodb://localhost"), "mongodb://localhost");
/// ```
pub fn redact_uri(uri: &str) -> String {
    match shown_span(uri) {
        Some((start, end)) => format!("{}***{}", &uri[..start], &uri[end..]),
        None => uri.to_owned(),
    }
}

/// `text` with the URI's password removed: the URI itself becomes [`redact_uri`]'s form, and
/// every occurrence of the password — as written, percent-decoded, as the driver reads it, and
/// each piece of it of 3 or more characters between reserved characters (the driver may quote
/// such a piece as a host or an option) — becomes `***`.
///
/// # Example
///
/// ```
/// let uri = "mongodb://u:Zq8?Secret91@db1/";
/// let text = "invalid server address u:Zq8: got Zq8";
/// assert_eq!(dispenser::error::redact::scrub(text, uri), "invalid server address u:***: got ***");
/// ```
pub fn scrub(text: &str, uri: &str) -> String {
    let secrets = secrets(uri);
    if secrets.is_empty() {
        return text.to_owned();
    }
    let mut out = text.replace(uri, &redact_uri(uri));
    for s in secrets {
        out = out.replace(&s, "***");
    }
    out
}

/// Refuses a URI whose password is not percent-encoded, or whose user info the driver would
/// split elsewhere than [`redact_uri`] does, so that the driver never quotes a piece of a
/// password in its errors. The message says which character to encode, not where it is.
///
/// # Errors
///
/// [`Error::InvalidArgument`] naming the redacted URI.
///
/// # Example
///
/// ```
/// assert!(dispenser::error::redact::check_credentials("mongodb://u:a%2Fb@db1/?appName=x@y").is_ok());
/// let err = dispenser::error::redact::check_credentials("mongodb://u:a/b@db1/").unwrap_err();
/// assert!(err.to_string().contains("percent-encode it as %2F"));
/// assert!(!err.to_string().contains("a/b"));
/// ```
pub fn check_credentials(uri: &str) -> Result<()> {
    let fail = |reason: String| {
        Err(Error::invalid_argument(
            format!("MongoDB URI {}", redact_uri(uri)),
            reason,
        ))
    };
    let (Some(wide), driver) = (wide_span(uri), driver_span(uri)) else {
        return Ok(());
    };
    if driver != Some(wide) && !last_at_is_in_an_option_value(uri) {
        // The driver would take a piece of the password for hosts or options.
        return fail(
            "the user info does not end before the options: a '?' in a password must be \
             percent-encoded as %3F"
                .to_owned(),
        );
    }
    let Some((start, end)) = driver else {
        return Ok(());
    };
    let password = &uri[start..end];
    if let Some(c) = password.chars().find(|c| RESERVED.contains(c)) {
        return fail(format!(
            "the password contains a raw '{c}': percent-encode it as %{:02X} (every {} and % \
             in a user name or password must be)",
            c as u32,
            RESERVED.map(|r| format!("'{r}'")).join(" ")
        ));
    }
    let bad_percent = password.split('%').skip(1).any(|rest| {
        let b = rest.as_bytes();
        b.len() < 2 || !b[0].is_ascii_hexdigit() || !b[1].is_ascii_hexdigit()
    });
    if bad_percent {
        return fail(
            "the password contains a '%' that starts no percent-encoded byte: write '%' as %25"
                .to_owned(),
        );
    }
    Ok(())
}

/// The error for a URI the driver refused: the driver's message made one line, without the
/// password, with the driver error as its cause in the message only.
pub(crate) fn invalid_uri(uri: &str, e: &mongodb::error::Error) -> Error {
    Error::invalid_argument(
        format!("MongoDB URI {}", redact_uri(uri)),
        scrub(&crate::error::describe_driver_error(e), uri),
    )
}

/// Where the URI's authority (user info and hosts) starts: after `scheme://`, or at 0.
fn authority_start(uri: &str) -> usize {
    uri.find("://").map_or(0, |i| i + 3)
}

/// The password as [`redact_uri`] hides it: from the first ':' of everything before the last
/// '@' of the URI, to that '@'.
fn wide_span(uri: &str) -> Option<(usize, usize)> {
    let s = authority_start(uri);
    let rest = &uri[s..];
    let at = rest.rfind('@')?;
    let colon = rest[..at].find(':')?;
    Some((s + colon + 1, s + at))
}

/// The password as the driver reads it: the user info ends at the last '@' before the first
/// '?'.
fn driver_span(uri: &str) -> Option<(usize, usize)> {
    let s = authority_start(uri);
    let rest = &uri[s..];
    let pre = &rest[..rest.find('?').unwrap_or(rest.len())];
    let at = pre.rfind('@')?;
    let colon = pre[..at].find(':')?;
    Some((s + colon + 1, s + at))
}

/// Whether the last '@' of the URI lies in the value of a `key=value` option (as in
/// `?appName=me@corp`) rather than in a password holding a raw '?': its option has a '=' before
/// it, and the hosts before the '?' have numeric ports (`u:Zq8?x=y@h` has not).
fn last_at_is_in_an_option_value(uri: &str) -> bool {
    let rest = &uri[authority_start(uri)..];
    let (Some(q), Some(at)) = (rest.find('?'), rest.rfind('@')) else {
        return false;
    };
    if at < q {
        return false;
    }
    let pair = rest[q + 1..at].rsplit('&').next().unwrap_or_default();
    if !pair.contains('=') {
        return false;
    }
    let pre = &rest[..q];
    let hosts = pre.rsplit_once('@').map_or(pre, |(_, h)| h);
    let hosts = hosts.split('/').next().unwrap_or_default();
    hosts.split(',').all(|h| {
        h.ends_with(']')
            || h.rsplit_once(':')
                .is_none_or(|(_, port)| port.parse::<u16>().is_ok())
    })
}

/// The span [`redact_uri`] hides: the driver's password when the user info clearly ends
/// before the options and a later '@' is an option value, else the wide span.
fn shown_span(uri: &str) -> Option<(usize, usize)> {
    let wide = wide_span(uri)?;
    match driver_span(uri) {
        Some(d) if d != wide && last_at_is_in_an_option_value(uri) => Some(d),
        _ => Some(wide),
    }
}

/// Everything to hide, longest first.
fn secrets(uri: &str) -> Vec<String> {
    let mut raw: Vec<&str> = Vec::new();
    if let Some((a, b)) = wide_span(uri) {
        raw.push(&uri[a..b]);
        // The pieces the driver may quote on their own (a host, a port, an option).
        raw.extend(
            uri[a..b]
                .split(|c: char| RESERVED.contains(&c) || matches!(c, '&' | '=' | ',' | '%'))
                .filter(|p| p.chars().count() >= 3),
        );
    }
    if let Some((a, b)) = driver_span(uri) {
        raw.push(&uri[a..b]);
    }
    let mut all: Vec<String> = Vec::new();
    for r in raw {
        all.push(r.to_owned());
        all.push(percent_decode(r));
    }
    all.retain(|s| !s.is_empty());
    all.sort_by_key(|s| std::cmp::Reverse(s.len()));
    all.dedup();
    all
}

fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if let (b'%', Some(h), Some(l)) = (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (URI, password as typed, what `redact_uri` shows).
    const CASES: &[(&str, &str, &str)] = &[
        (
            "mongodb://alice:Zq8/Secret91@127.0.0.1:9/",
            "Zq8/Secret91",
            "mongodb://alice:***@127.0.0.1:9/",
        ),
        (
            "mongodb://alice:Zq8?Secret91@127.0.0.1:9/",
            "Zq8?Secret91",
            "mongodb://alice:***@127.0.0.1:9/",
        ),
        (
            "mongodb://alice:Zq8@Secret91@h1,h2/db?w=1",
            "Zq8@Secret91",
            "mongodb://alice:***@h1,h2/db?w=1",
        ),
        (
            "mongodb://alice:Zq8:Secret91@h",
            "Zq8:Secret91",
            "mongodb://alice:***@h",
        ),
        (
            "mongodb://alice:Zq8#Secret91@h",
            "Zq8#Secret91",
            "mongodb://alice:***@h",
        ),
        (
            "mongodb://alice:Zq8%Secret91@h",
            "Zq8%Secret91",
            "mongodb://alice:***@h",
        ),
        (
            "mongodb://alice:Zq8%2FSecret91@h",
            "Zq8%2FSecret91",
            "mongodb://alice:***@h",
        ),
        (
            "mongodb://alice:/?@:#%@h/?appName=x",
            "/?@:#%",
            "mongodb://alice:***@h/?appName=x",
        ),
        (
            "mongodb://alice:db9.example.net:27017@db1.example.net:27017/",
            "db9.example.net:27017",
            "mongodb://alice:***@db1.example.net:27017/",
        ),
        (
            "mongodb+srv://u:p%40ss@cluster0.example.net/db?retryWrites=true",
            "p%40ss",
            "mongodb+srv://u:***@cluster0.example.net/db?retryWrites=true",
        ),
        (
            "alice:Zq8/Secret91@h:27017",
            "Zq8/Secret91",
            "alice:***@h:27017",
        ),
    ];

    #[test]
    fn passwords_are_redacted_however_they_are_written() {
        for (uri, password, shown) in CASES {
            assert_eq!(redact_uri(uri), *shown, "{uri}");
            assert!(!redact_uri(uri).contains(password));
        }
        assert_eq!(redact_uri("mongodb://user@host"), "mongodb://user@host");
        assert_eq!(redact_uri("not a uri"), "not a uri");
        assert_eq!(
            redact_uri("mongodb://h/?appName=a@b"),
            "mongodb://h/?appName=a@b"
        );
        assert_eq!(
            redact_uri("mongodb://u:p@h/?appName=a@b"),
            "mongodb://u:***@h/?appName=a@b"
        );
    }

    #[test]
    fn scrub_removes_every_form_of_the_password() {
        for (uri, password, _) in CASES {
            let decoded = percent_decode(password);
            let text = format!("failed on {uri}: {password} and {decoded} refused");
            let out = scrub(&text, uri);
            assert!(!out.contains(password) && !out.contains(&decoded), "{out}");
            assert!(!out.contains("Secret91") && !out.contains("Zq8"), "{out}");
        }
        // What the driver says about a password with a raw '?': the pieces go too.
        let uri = "mongodb://alice:Zq8?x=Secret91@127.0.0.1:9/";
        let said = "invalid server address alice:Zq8: got Zq8; option x=Secret91@127.0.0.1:9/";
        let out = scrub(said, uri);
        assert!(!out.contains("Zq8") && !out.contains("Secret91"), "{out}");
        // Without a password, nothing changes.
        assert_eq!(scrub("a: b", "mongodb://h:1/"), "a: b");
    }

    #[test]
    fn credentials_the_driver_would_misread_are_refused() {
        // Every password of CASES but the percent-encoded ones is refused, and never quoted.
        for (uri, password, _) in CASES {
            let r = check_credentials(uri);
            if password.contains("%2F") || password.contains("%40") || *password == "p%40ss" {
                assert!(r.is_ok(), "{uri}: {r:?}");
            } else {
                let err = r.expect_err(uri).to_string();
                assert!(
                    err.contains("percent-encode") || err.contains("%25"),
                    "{err}"
                );
                assert!(!err.contains(password), "{err}");
            }
        }
        let err = check_credentials("mongodb://u:a/b@h")
            .unwrap_err()
            .to_string();
        assert!(err.contains("raw '/'") && err.contains("%2F"), "{err}");
        let err = check_credentials("mongodb://u:a?b@h")
            .unwrap_err()
            .to_string();
        assert!(err.contains("%3F"), "{err}");
        let err = check_credentials("mongodb://u:a?x=b@h")
            .unwrap_err()
            .to_string();
        assert!(err.contains("%3F"), "{err}");
        let err = check_credentials("mongodb://u:a%zzb@h")
            .unwrap_err()
            .to_string();
        assert!(err.contains("%25"), "{err}");
        // An '@' in an option value is not a password.
        for ok in [
            "mongodb://u:p@h/?appName=a@b",
            "mongodb://h:27017/?appName=a@b",
            "mongodb://[::1]/?appName=a@b",
            "mongodb://h/?appName=a@b",
            "mongodb://u:p%3F@h/?w=1",
            "mongodb://h",
        ] {
            assert!(check_credentials(ok).is_ok(), "{ok}");
        }
    }
}
