//! Sequence names as the service's OpenAPI document declares them, checked before anything
//! else looks at a name: what the document can say is answered 400 (empty, more than 200
//! characters, a control character, a leading `$`, and in a name being created `@` or `~`);
//! what it cannot (a name of at most 200 characters but more than 200 bytes of UTF-8) is 422.
//! The library checks the same rules again ([`dispenser::sequence::validate_name`]).

use axum::http::StatusCode;
use dispenser::sequence::MAX_NAME_BYTES;

use super::errors::ApiError;

/// The longest name, in characters as the document counts them (and in bytes, as stored).
pub(super) const MAX_NAME_CHARS: usize = MAX_NAME_BYTES;

/// The document's pattern for a name (JSON Schema, ECMA 262): no control character
/// (Unicode `Cc`: U+0000–U+001F, U+007F–U+009F), not starting with `$`. It ends with
/// `(?![\s\S])` (nothing follows), not `$`: in Python's regular expressions, which tools
/// such as Schemathesis read the document with, `$` also matches before a final line feed,
/// so `"name\n"` would pass as valid there.
pub(super) const NAME_PATTERN: &str =
    "^[^\\u0000-\\u001F\\u007F-\\u009F$][^\\u0000-\\u001F\\u007F-\\u009F]*(?![\\s\\S])";

/// The pattern of a name as a path parameter: as [`NAME_PATTERN`], and the same rules for what
/// the value says once percent-decoded — no `%` escape of a control character (`%00`–`%1F`,
/// `%7F`, `%C2%80`–`%C2%9F`, in either case), no leading `%24` (`$`). A client that treats the
/// values it sends as possibly percent-encoded (Schemathesis decodes a value once, then
/// encodes it) sends `a%0A` as the name `a` and a line feed, which the service refuses (400):
/// the document rules it out.
pub(super) const PATH_NAME_PATTERN: &str = concat!(
    "^(?![\\s\\S]*%(?:[01][0-9A-Fa-f]|7[Ff]|[Cc]2%[89][0-9A-Fa-f]))(?!%24)",
    "[^\\u0000-\\u001F\\u007F-\\u009F$][^\\u0000-\\u001F\\u007F-\\u009F]*(?![\\s\\S])"
);

/// The pattern for a name being created: as [`NAME_PATTERN`], and no `@` (scopes) or `~`
/// (stripes).
pub(super) const CREATED_NAME_PATTERN: &str =
    "^[^\\u0000-\\u001F\\u007F-\\u009F$@~][^\\u0000-\\u001F\\u007F-\\u009F@~]*(?![\\s\\S])";

/// Checks `name` as the document declares it (`created`: a name being created).
pub(super) fn check_name(name: &str, created: bool) -> Result<(), ApiError> {
    check_name_of("sequence", name, created)
}

/// [`check_name`] for the name of a `what` (a sequence, a queue), named so in the message.
pub(super) fn check_name_of(what: &str, name: &str, created: bool) -> Result<(), ApiError> {
    let bad = |reason: String| {
        Err(ApiError::invalid_input(format!(
            "invalid {what} name {name:?}: {reason}"
        )))
    };
    // Characters as the document counts them (an ASCII name: one per byte).
    let ascii = name.is_ascii();
    let chars = if ascii {
        name.len()
    } else {
        name.chars().count()
    };
    if name.is_empty() {
        return bad("must not be empty".into());
    }
    if chars > MAX_NAME_CHARS {
        return bad(format!(
            "is {chars} characters long; at most {MAX_NAME_CHARS} are allowed"
        ));
    }
    // An ASCII name (the usual one) is scanned byte by byte, cheaper than decoding it: every
    // byte folded without stopping early (a few vector instructions), the culprit looked for
    // only when there is one.
    let control = if ascii {
        let any = name
            .bytes()
            .fold(false, |any, b| any | b.is_ascii_control());
        any.then(|| name.bytes().find(u8::is_ascii_control).map(char::from))
            .flatten()
    } else {
        name.chars().find(|c| c.is_control())
    };
    if let Some(c) = control {
        return bad(format!(
            "must not contain a control character (found {})",
            c.escape_unicode()
        ));
    }
    if name.starts_with('$') {
        return bad("must not start with '$'".into());
    }
    if created && let Some(c) = name.chars().find(|c| matches!(c, '@' | '~')) {
        return bad(format!(
            "must not contain '{c}' in a name you create: '@' separates a template from its scope key (draw `T@KEY` to make a scope) and '~' a striped sequence from its stripe number"
        ));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!(
                "invalid {what} name {name:?}: is {} bytes of UTF-8 long; at most {MAX_NAME_BYTES} are allowed",
                name.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The service's check and the library's agree: what one accepts the other does.
    #[test]
    fn the_documents_rules_are_the_librarys() {
        let long_ascii = "a".repeat(200);
        let too_long = "a".repeat(201);
        let wide = "é".repeat(101); // 101 characters, 202 bytes
        for name in [
            "orders",
            "invoices@acme",
            "ids~3",
            "",
            "$x",
            "a$",
            "tab\there",
            "nl\n",
            "del\u{7f}",
            "c1\u{85}",
            "nbsp\u{a0}",
            "@x",
            long_ascii.as_str(),
            too_long.as_str(),
            wide.as_str(),
        ] {
            let ours = check_name(name, false).is_ok();
            assert_eq!(
                ours,
                dispenser::sequence::validate_name(name).is_ok(),
                "{name:?}"
            );
            let created = check_name(name, true).is_ok();
            assert_eq!(
                created,
                dispenser::sequence::validate_plain_name(name).is_ok(),
                "{name:?}"
            );
        }
        let e = check_name(&wide, false).unwrap_err();
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        let e = check_name(&too_long, false).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
    }
}
