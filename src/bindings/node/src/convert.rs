//! Values across the border: the core's errors as JavaScript errors, JavaScript numbers as
//! exact 64-bit integers, and the core's JSON views of its states as JavaScript objects
//! whose integers are `bigint`s.

use std::time::Duration;

use napi::bindgen_prelude::{BigInt, Either, ToNapiValue};
use napi::{check_status, sys};
use napi_derive::napi;
use serde_json::Value;

/// An integer as JavaScript gives it: a `number` (a safe integer) or a `bigint`.
pub type Int = Either<f64, BigInt>;

/// The largest integer a JavaScript `number` holds exactly (2^53 − 1).
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// The core's error as a JavaScript error. The JavaScript wrapper (`index.js`) reads the
/// `[dispenser:KIND:CODE:WRITTEN]` head of the message and throws the error class of the
/// kind, with `code`, `kind` and `written` set and the head removed.
pub fn js(e: dispenser::Error) -> napi::Error {
    napi::Error::from_reason(format!(
        "[dispenser:{}:{}:{}] {e}",
        kind(e.kind()),
        e.code(),
        e.written().as_str()
    ))
}

/// The kind's name on every surface: the core's, snake_case (`not_found`, `queue_refused`, …).
pub fn kind(kind: dispenser::error::ErrorKind) -> &'static str {
    kind.as_str()
}

/// A refused argument, as the core refuses one.
pub fn invalid(what: &str, reason: String) -> napi::Error {
    js(dispenser::Error::InvalidArgument {
        what: what.to_owned(),
        reason,
    })
}

/// `v` as an `i64`, or an error naming `what`.
pub fn int(what: &str, v: Int) -> napi::Result<i64> {
    match v {
        Either::A(f) => {
            if f.fract() != 0.0 || !f.is_finite() || f.abs() > MAX_SAFE {
                return Err(invalid(
                    what,
                    format!(
                        "{} is not a safe integer; give an integer number up to 2^53 - 1, or a bigint",
                        shown(f)
                    ),
                ));
            }
            // Exact: a safe integer.
            Ok(f as i64)
        }
        // Lossless only for one word whose value fits (napi's `get_i64`).
        Either::B(b) => match b.get_i64() {
            (i, true) => Ok(i),
            _ => Err(invalid(
                what,
                format!(
                    "{} does not fit in a signed 64-bit integer",
                    show_bigint(&b)
                ),
            )),
        },
    }
}

/// `v` as an `i64`, when given.
pub fn opt_int(what: &str, v: Option<Int>) -> napi::Result<Option<i64>> {
    v.map(|v| int(what, v)).transpose()
}

/// `v` as a count (0 or more), or an error naming `what`.
pub fn count(what: &str, v: Int) -> napi::Result<u64> {
    let n = match v {
        Either::B(b) if !b.sign_bit && b.words.len() == 1 => return Ok(b.words[0]),
        other => int(what, other)?,
    };
    u64::try_from(n).map_err(|_| invalid(what, format!("{n} is negative; give 0 or more")))
}

/// Seconds (a fraction allowed) as a duration, or an error naming `what`.
pub fn seconds(what: &str, s: f64) -> napi::Result<Duration> {
    dispenser::translate::seconds(what, s).map_err(js)
}

/// Milliseconds as a duration, or an error naming `what`.
pub fn millis(what: &str, ms: f64) -> napi::Result<Duration> {
    if !ms.is_finite() || ms < 0.0 {
        return Err(invalid(
            what,
            format!(
                "{} ms is not a duration; give 0 or more milliseconds",
                shown(ms)
            ),
        ));
    }
    Duration::try_from_secs_f64(ms / 1000.0).map_err(|_| {
        invalid(
            what,
            format!("{ms} ms is not a duration the library can hold"),
        )
    })
}

/// A `number` as JavaScript writes it (`Infinity`, `-Infinity`, `NaN`; Rust writes `inf`).
fn shown(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_owned()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
    } else {
        f.to_string()
    }
}

fn show_bigint(b: &BigInt) -> String {
    let (v, lossless) = b.get_i128();
    if lossless && b.words.len() <= 2 {
        format!("{v}n")
    } else {
        "the bigint".to_owned()
    }
}

/// A JSON value of the core (`to_json`) as a JavaScript value: keys in camelCase, every
/// integer a `bigint` (exact over the whole 64-bit range), other numbers `number`s.
pub struct Json(pub Value);

impl ToNapiValue for Json {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        // SAFETY: called by napi on the JavaScript thread with its env.
        unsafe { to_js(env, &val.0) }
    }
}

/// The settings an `ensure` found changed since by an alter, as an array of `{setting,
/// stored, asked}` (what a handle's `altered` answers).
pub fn altered(a: &[dispenser::sequence::Altered]) -> Json {
    Json(Value::Array(
        a.iter()
            .map(|a| serde_json::json!({ "setting": a.setting, "stored": a.stored, "asked": a.asked }))
            .collect(),
    ))
}

/// Several JSON values as a JavaScript array.
pub struct JsonList(pub Vec<Value>);

impl ToNapiValue for JsonList {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        // SAFETY: as `Json`.
        unsafe { to_js(env, &Value::Array(val.0)) }
    }
}

unsafe fn to_js(env: sys::napi_env, v: &Value) -> napi::Result<sys::napi_value> {
    // SAFETY (every call below): `env` is the live env napi gave us, on its thread.
    unsafe {
        match v {
            Value::Null => ToNapiValue::to_napi_value(env, napi::bindgen_prelude::Null),
            Value::Bool(b) => ToNapiValue::to_napi_value(env, *b),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    ToNapiValue::to_napi_value(env, napi::bindgen_prelude::i64n(i))
                } else if let Some(u) = n.as_u64() {
                    ToNapiValue::to_napi_value(env, u)
                } else {
                    ToNapiValue::to_napi_value(env, n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => ToNapiValue::to_napi_value(env, s.as_str()),
            Value::Array(items) => {
                let mut array = std::ptr::null_mut();
                check_status!(sys::napi_create_array_with_length(
                    env,
                    items.len(),
                    &mut array
                ))?;
                for (i, item) in items.iter().enumerate() {
                    let value = to_js(env, item)?;
                    let index = u32::try_from(i).unwrap_or(u32::MAX);
                    check_status!(sys::napi_set_element(env, array, index, value))?;
                }
                Ok(array)
            }
            Value::Object(map) => {
                let mut object = std::ptr::null_mut();
                check_status!(sys::napi_create_object(env, &mut object))?;
                for (key, item) in map {
                    let value = to_js(env, item)?;
                    let key = ToNapiValue::to_napi_value(env, camel(key).as_str())?;
                    check_status!(sys::napi_set_property(env, object, key, value))?;
                }
                Ok(object)
            }
        }
    }
}

/// `snake_case` as `camelCase` (other keys as they are).
fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for (i, c) in key.chars().enumerate() {
        if c == '_' && i > 0 {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `force`: the one option of every operation that can be forced (a reset backwards, an
/// alter that strands numbers, a release of a live lease, a delete while something is held).
#[napi(object)]
pub struct ForceOptions {
    /// Do it even so. Defaults to false.
    pub force: Option<bool>,
    /// Aborts the call (see `SignalOptions`).
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<crate::abort::Signal>,
}

/// Whether `options` force the operation.
pub fn forced(options: Option<ForceOptions>) -> bool {
    options.and_then(|o| o.force).unwrap_or(false)
}
