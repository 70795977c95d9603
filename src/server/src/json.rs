//! Request bodies (and the `Idempotency-Key` header): the content type, the body read within the request timeout (a body that
//! does not arrive in time is 408, not a database timeout), and whole numbers read exactly
//! (`10`, `10.0` and `1e1` are the same integer, as JSON Schema's `integer` says; `10.5` or a
//! number outside 64 bits is refused, never rounded).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::errors::ApiError;

/// The largest request body accepted (bodies are small JSON objects); larger is 413.
pub(super) const MAX_BODY: usize = 64 * 1024;

/// In a request's extensions: whether its body is being read now (so that the request timeout
/// can tell a client that does not send its body, 408, from a slow database, 503).
#[derive(Clone, Debug, Default)]
pub(super) struct ReadingBody(pub(super) Arc<AtomicBool>);

impl ReadingBody {
    pub(super) fn now(&self) -> bool {
        self.0.load(SeqCst)
    }
}

/// Whether the request says its body is JSON (`application/json`, or `application/…+json`).
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The error of a body that could not be read: 413 past [`MAX_BODY`] (whether its length
/// was declared or it ran past the limit), else 400.
fn unread(rejection: axum::extract::rejection::BytesRejection) -> ApiError {
    let status = rejection.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            status,
            "payload_too_large",
            format!("the request body is larger than {MAX_BODY} bytes"),
        )
    } else {
        ApiError::new(status, "bad_request", rejection.body_text())
    }
}

/// The JSON body of `req`, read only now (after the token was checked): 415 for another
/// content type, 413 past the size limit, 400 `malformed_json` for a body that is not the
/// JSON the operation takes.
pub(super) async fn json_body<T: DeserializeOwned>(req: Request) -> Result<T, ApiError> {
    if !is_json(req.headers()) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "expected Content-Type: application/json",
        ));
    }
    let reading = req.extensions().get::<ReadingBody>().cloned();
    if let Some(r) = &reading {
        r.0.store(true, SeqCst);
    }
    let bytes = Bytes::from_request(req, &()).await;
    if let Some(r) = &reading {
        r.0.store(false, SeqCst);
    }
    let bytes = bytes.map_err(unread)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            format!(
                "the request body is not the JSON this operation takes: {e}{}",
                renamed(&e.to_string())
            ),
        )
    })
}

/// The fields of request bodies that were renamed (old, new, what the new one holds): a body
/// that gives the old name is refused (400), its message naming the new one.
const RENAMED: &[(&str, &str, &str)] = &[
    (
        "max_lease_ms",
        "max_lease_seconds",
        " (in seconds, a fraction allowed: 0.5 is 500 ms)",
    ),
    ("value", "next", ""),
];

/// What serde's `message` about a body says of a renamed field: `; `old` is now `new`` when it
/// refused an old name the body's type has the new name of, else nothing.
fn renamed(message: &str) -> String {
    RENAMED
        .iter()
        .find(|(old, new, _)| {
            message.contains(&format!("unknown field `{old}`"))
                && message.contains(&format!("`{new}`"))
        })
        .map(|(old, new, unit)| format!("; `{old}` is now `{new}`{unit}"))
        .unwrap_or_default()
}

/// The JSON body of `req` when it has one, else `T::default()`: an empty body (with or without
/// a content type) or `null` is no body; another is read as [`json_body`] reads it.
pub(super) async fn optional_json_body<T: DeserializeOwned + Default>(
    req: Request,
) -> Result<T, ApiError> {
    let json = is_json(req.headers());
    let reading = req.extensions().get::<ReadingBody>().cloned();
    if let Some(r) = &reading {
        r.0.store(true, SeqCst);
    }
    let bytes = Bytes::from_request(req, &()).await;
    if let Some(r) = &reading {
        r.0.store(false, SeqCst);
    }
    let bytes = bytes.map_err(unread)?;
    if bytes.is_empty() {
        return Ok(T::default());
    }
    if !json {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "expected Content-Type: application/json (or no body)",
        ));
    }
    let malformed = |e: String| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            format!("the request body is not the JSON this operation takes: {e}"),
        )
    };
    // `null` is no body too (the document describes these bodies as nullable); anything but an
    // object is refused (serde would read a struct from an array).
    match serde_json::from_slice::<serde_json::Value>(&bytes)
        .map_err(|e| malformed(e.to_string()))?
    {
        serde_json::Value::Null => Ok(T::default()),
        v @ serde_json::Value::Object(_) => {
            serde_json::from_value(v).map_err(|e| malformed(e.to_string()))
        }
        _ => Err(malformed("expected an object".to_owned())),
    }
}

/// The integer a JSON number's text stands for, when it is a whole number that fits in 64
/// bits: `10`, `10.0`, `1e1`, `1.5e1`, `-0`; `None` for `10.5`, `1e-1` or `1e19`. Exact for
/// every digit (no floating point in between).
pub(super) fn exact_integer(text: &str) -> Option<i64> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i32>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || (mantissa.contains('.') && frac.is_empty())
    {
        return None;
    }
    let all = format!("{int}{frac}");
    let mut digits = all.trim_start_matches('0');
    // The value is digits × 10^shift.
    let mut shift = i64::from(exponent) - i64::try_from(frac.len()).ok()?;
    if shift < 0 {
        let drop = usize::try_from(-shift).ok()?;
        if drop >= digits.len() {
            // Below 1 in magnitude: only zero is whole.
            return digits.bytes().all(|b| b == b'0').then_some(0);
        }
        let (keep, dropped) = digits.split_at(digits.len() - drop);
        if !dropped.bytes().all(|b| b == b'0') {
            return None;
        }
        digits = keep;
        shift = 0;
    }
    if digits.is_empty() {
        return Some(0);
    }
    // 10^19 is already past i64.
    if i64::try_from(digits.len()).ok()? + shift > 19 {
        return None;
    }
    let mut value: i128 = digits.parse().ok()?;
    for _ in 0..shift {
        value *= 10;
    }
    i64::try_from(if negative { -value } else { value }).ok()
}

/// The first characters of `raw`, for a message.
fn shown(raw: &str) -> String {
    let mut s: String = raw.chars().take(40).collect();
    if s.len() < raw.len() {
        s.push('…');
    }
    s
}

/// `#[serde(deserialize_with = "whole")]`: an `i64` field that takes any JSON number with a
/// whole value (see [`exact_integer`]).
pub(super) fn whole<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let raw = Box::<RawValue>::deserialize(d)?;
    exact_integer(raw.get()).ok_or_else(|| {
        D::Error::custom(format!(
            "expected a whole number from -2^63 to 2^63-1, found {}",
            shown(raw.get())
        ))
    })
}

/// [`whole`] for an optional field (`null` or absent: `None`).
pub(super) fn whole_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let raw = Box::<RawValue>::deserialize(d)?;
    if raw.get() == "null" {
        return Ok(None);
    }
    exact_integer(raw.get()).map(Some).ok_or_else(|| {
        D::Error::custom(format!(
            "expected a whole number from -2^63 to 2^63-1 or null, found {}",
            shown(raw.get())
        ))
    })
}

/// The `Idempotency-Key` header: `None` when absent; 400 when not printable ASCII.
pub(super) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(v) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let key = v
        .to_str()
        .ok()
        .filter(|k| (1..=64).contains(&k.len()) && k.bytes().all(|b| (0x20..=0x7e).contains(&b)));
    match key {
        Some(k) => Ok(Some(k.to_owned())),
        None => Err(ApiError::invalid_input(
            "Idempotency-Key must be 1 to 64 printable ASCII characters",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body giving a renamed field's old name is refused naming the new one (and only
    /// where the body's type has the new one: `value` elsewhere is merely unknown).
    #[test]
    fn a_renamed_field_is_refused_naming_its_new_name() {
        #[derive(Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Alter {
            max_lease_seconds: f64,
        }
        #[derive(Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Other {
            count: u64,
        }
        let said = |e: serde_json::Error| renamed(&e.to_string());
        let e = serde_json::from_str::<Alter>(r#"{"max_lease_ms": 60000}"#).unwrap_err();
        assert_eq!(
            said(e),
            "; `max_lease_ms` is now `max_lease_seconds` (in seconds, a fraction allowed: 0.5 is 500 ms)"
        );
        let e = serde_json::from_str::<Other>(r#"{"value": 3}"#).unwrap_err();
        assert_eq!(said(e), "");
        let e = serde_json::from_str::<Alter>(r#"{"max_lease_seconds": "x"}"#).unwrap_err();
        assert_eq!(said(e), "");
    }

    #[test]
    fn whole_numbers_are_read_exactly() {
        for (text, want) in [
            ("10", Some(10)),
            ("10.0", Some(10)),
            ("-3776146.0", Some(-3_776_146)),
            ("1e1", Some(10)),
            ("1E+1", Some(10)),
            ("1.5e1", Some(15)),
            ("100e-2", Some(1)),
            ("0.00", Some(0)),
            ("-0", Some(0)),
            ("0e999", Some(0)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9.223372036854775807e18", Some(i64::MAX)),
            // Past 2^53: a float would round it; the text does not.
            ("9007199254740993.0", Some(9_007_199_254_740_993)),
            ("10.5", None),
            ("1e-1", None),
            ("0.5", None),
            ("9223372036854775808", None),
            ("1e19", None),
            ("1e99999999999", None),
            ("\"10\"", None),
            ("true", None),
            ("null", None),
        ] {
            assert_eq!(exact_integer(text), want, "{text}");
        }
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct Body {
        #[serde(deserialize_with = "whole")]
        to: i64,
        #[serde(default, deserialize_with = "whole_or_null")]
        max: Option<i64>,
    }

    #[test]
    fn bodies_take_whole_numbers_written_as_floats() {
        let b: Body = serde_json::from_str(r#"{"to": 10.0, "max": 2e3}"#).unwrap();
        assert_eq!(
            b,
            Body {
                to: 10,
                max: Some(2000)
            }
        );
        let b: Body = serde_json::from_str(r#"{"to": -1, "max": null}"#).unwrap();
        assert_eq!(b, Body { to: -1, max: None });
        let b: Body = serde_json::from_str(r#"{"to": 1}"#).unwrap();
        assert_eq!(b.max, None);
        let e = serde_json::from_str::<Body>(r#"{"to": 10.5}"#).unwrap_err();
        assert!(e.to_string().contains("found 10.5"), "{e}");
        assert!(serde_json::from_str::<Body>(r#"{"to": "ten"}"#).is_err());
    }
}
