//! Keeping credentials out of everything printed: URIs are shown with their password
//! replaced, and texts that may quote a URI are scrubbed of the password.

/// The URI with the password of its user info replaced by `***`.
///
/// # Example
///
/// ```
/// use dispenser::redact_uri;
///
/// assert_eq!(
///     redact_uri("mongodb://app:s3cret@db1,db2/?tls=true"),
///     "mongodb://app:***@db1,db2/?tls=true"
/// );
/// assert_eq!(redact_uri("mongodb://localhost"), "mongodb://localhost");
/// ```
pub fn redact_uri(uri: &str) -> String {
    match split_password(uri) {
        Some((before, _, after)) => format!("{before}***{after}"),
        None => uri.to_owned(),
    }
}

/// `text` with every occurrence of the URI's password (raw and percent-decoded) replaced by
/// `***`.
pub fn scrub(text: &str, uri: &str) -> String {
    let Some((_, password, _)) = split_password(uri) else {
        return text.to_owned();
    };
    let mut out = text.replace(uri, &redact_uri(uri));
    if !password.is_empty() {
        out = out.replace(password, "***");
        let decoded = percent_decode(password);
        if !decoded.is_empty() {
            out = out.replace(&decoded, "***");
        }
    }
    out
}

/// Splits `scheme://user:password@rest` into (`scheme://user:`, `password`, `@rest`).
fn split_password(uri: &str) -> Option<(&str, &str, &str)> {
    let scheme_end = uri.find("://")? + 3;
    let rest = &uri[scheme_end..];
    // The user info ends at the last '@' before the path ('/') or query ('?').
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let at = rest[..authority_end].rfind('@')?;
    let userinfo = &rest[..at];
    let colon = userinfo.find(':')?;
    let pw_start = scheme_end + colon + 1;
    let pw_end = scheme_end + at;
    Some((&uri[..pw_start], &uri[pw_start..pw_end], &uri[pw_end..]))
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

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_uri("mongodb+srv://u:p%40ss@cluster0.example.net/db?retryWrites=true"),
            "mongodb+srv://u:***@cluster0.example.net/db?retryWrites=true"
        );
        assert_eq!(redact_uri("mongodb://user@host"), "mongodb://user@host");
        assert_eq!(redact_uri("not a uri"), "not a uri");
        assert_eq!(
            redact_uri("mongodb://u:a@b@host/x"),
            "mongodb://u:***@host/x"
        );
    }

    #[test]
    fn scrub_removes_raw_and_decoded_passwords() {
        let uri = "mongodb://u:p%40ss@h/";
        let text = format!("failed on {uri}: auth for p@ss and p%40ss refused");
        let out = scrub(&text, uri);
        assert!(!out.contains("p@ss") && !out.contains("p%40ss"), "{out}");
        assert!(out.contains("mongodb://u:***@h/"));
    }
}
