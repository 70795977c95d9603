//! What the language bindings translate the same way: their arguments into the core's specs
//! and options, each refusal worded once (hidden from the docs: not part of the library's API).
//!
//! A binding reads its language's values (Python keywords, a JavaScript options object) into
//! the plain values these functions take, calls one, and turns a refusal into its language's
//! error: so `max_lease=-1` in Python and `maxLeaseSeconds: -1` in Node.js are refused by the
//! same rule, in the same words, naming the argument as the caller spelled it.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::gapless::GaplessOptions;
use crate::jiff::tz::TimeZone;
use crate::mongodb::bson::Document;
use crate::queue::QueueSpec;
use crate::{Format, Spec};

fn invalid(what: &str, reason: String) -> Error {
    Error::InvalidArgument {
        what: what.to_owned(),
        reason,
    }
}

/// A sequence's spec from the fields given; the others keep the core's defaults (the spec
/// is checked where it is used: `create`, `ensure`).
pub fn spec(
    start: Option<i64>,
    step: Option<i64>,
    min: Option<i64>,
    max: Option<i64>,
    cycle: Option<bool>,
) -> Spec {
    let mut s = Spec::default();
    if let Some(v) = start {
        s = s.with_start(v);
    }
    if let Some(v) = step {
        s = s.with_step(v);
    }
    if let Some(v) = min {
        s = s.with_min(v);
    }
    if let Some(v) = max {
        s = s.with_max(v);
    }
    if let Some(v) = cycle {
        s = s.with_cycle(v);
    }
    s
}

/// The time zone of an IANA name (`Europe/Paris`); `what` names the argument in a refusal.
pub fn time_zone(what: &str, name: &str) -> Result<TimeZone> {
    TimeZone::get(name).map_err(|e| invalid(what, format!("{name:?}: {e}")))
}

/// A queue's spec from the fields given; the others keep the core's defaults. `time_zone`
/// names the argument that carries the zone, as the binding spells it.
pub fn queue_spec(
    min: Option<i64>,
    max: Option<i64>,
    format: Option<&str>,
    zone: Option<(&str, &str)>,
    daily: Option<bool>,
) -> Result<QueueSpec> {
    let mut s = QueueSpec::default();
    if let Some(v) = min {
        s = s.with_min(v);
    }
    if let Some(v) = max {
        s = s.with_max(v);
    }
    if let Some(f) = format {
        s = s.with_format(Format::parse(f)?);
    }
    if let Some((what, name)) = zone {
        s = s.with_time_zone(&time_zone(what, name)?);
    }
    if let Some(v) = daily {
        s = s.with_daily(v);
    }
    Ok(s)
}

/// A duration given in seconds (fractions allowed): more than 0, and one the library can hold.
pub fn seconds(what: &str, s: f64) -> Result<Duration> {
    if !(s.is_finite() && s > 0.0) {
        return Err(invalid(
            what,
            format!("{s} seconds is not a duration: give a positive number of seconds"),
        ));
    }
    Duration::try_from_secs_f64(s)
        .map_err(|e| invalid(what, format!("{s} seconds is not a duration: {e}")))
}

/// The durations of a gap-free sequence's options, in seconds, each with the argument's name
/// as the binding spells it.
#[derive(Default)]
pub struct GaplessSeconds<'a> {
    /// The lease a call takes.
    pub lease: Option<(&'a str, f64)>,
    /// The longest lease any holder gets.
    pub max_lease: Option<(&'a str, f64)>,
    /// How long a call waits for a busy sequence.
    pub wait: Option<(&'a str, f64)>,
}

/// A gap-free sequence's options from the fields given; the others keep the core's defaults.
pub fn gapless_options(
    collection: &str,
    field: &str,
    start: Option<i64>,
    durations: GaplessSeconds<'_>,
    void_field: Option<&str>,
    void_extra: Option<Document>,
) -> Result<GaplessOptions> {
    let mut o = GaplessOptions::new(collection, field);
    if let Some(v) = start {
        o = o.with_start(v);
    }
    if let Some((what, s)) = durations.lease {
        o = o.with_lease(seconds(what, s)?);
    }
    if let Some((what, s)) = durations.max_lease {
        o = o.with_max_lease(seconds(what, s)?);
    }
    if let Some((what, s)) = durations.wait {
        o = o.with_wait(seconds(what, s)?);
    }
    if let Some(f) = void_field {
        o = o.with_void_field(f);
    }
    if let Some(extra) = void_extra {
        o = o.with_void_extra(extra);
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_argument_as_the_binding_spells_it() {
        let e = seconds("maxLeaseSeconds", -1.0).unwrap_err().to_string();
        assert!(
            e.contains("maxLeaseSeconds") && e.contains("-1 seconds is not a duration"),
            "{e}"
        );
        assert!(seconds("wait", 0.0).is_err());
        assert!(seconds("wait", f64::NAN).is_err());
        assert!(seconds("wait", 1e300).is_err());
        assert_eq!(seconds("wait", 0.25).unwrap(), Duration::from_millis(250));
        let e = time_zone("timeZone", "Mars/Olympus")
            .unwrap_err()
            .to_string();
        assert!(e.contains("timeZone") && e.contains("Mars/Olympus"), "{e}");
        let e = queue_spec(None, None, None, Some(("time_zone", "Nowhere")), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("time_zone"), "{e}");
    }

    #[test]
    fn the_fields_given_are_set_and_the_others_keep_the_defaults() {
        let s = spec(Some(5), None, None, Some(9), Some(true));
        assert_eq!(
            s,
            Spec::default().with_start(5).with_max(9).with_cycle(true)
        );
        assert_eq!(spec(None, None, None, None, None), Spec::default());
        let q = queue_spec(Some(1), Some(9), Some("A-{n}"), None, Some(true)).unwrap();
        assert_eq!((q.min, q.max, q.daily), (1, 9, true));
        let g = gapless_options(
            "inv",
            "n",
            Some(3),
            GaplessSeconds {
                wait: Some(("wait", 2.0)),
                ..GaplessSeconds::default()
            },
            None,
            None,
        )
        .unwrap();
        assert_eq!((g.start, g.wait), (3, Duration::from_secs(2)));
    }
}
