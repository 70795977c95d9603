//! Argument pieces several commands share: the limits of counts and blocks, `--strategy`,
//! and value parsers whose errors name the value and the limits.

use std::time::Duration;

use clap::ValueEnum;
use dispenser::sequence::Strategy;

/// The most numbers one `next` invocation may print.
pub const MAX_COUNT: u64 = 100_000_000;

/// The largest block `next --block` may reserve.
pub const MAX_BLOCK: u64 = 10_000_000;

/// `--strategy`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum StrategyArg {
    /// Compare-and-set on the version (first writer wins).
    Cas,
    /// One-round-trip conditional increment (falls back to CAS at the wrap).
    Inc,
}

impl From<StrategyArg> for Strategy {
    fn from(s: StrategyArg) -> Self {
        match s {
            StrategyArg::Cas => Strategy::Cas,
            StrategyArg::Inc => Strategy::ConditionalIncrement,
        }
    }
}

/// A value parser for a whole number in `lo..=hi` whose errors name the value and the
/// limits: "-1 is not allowed: must be between 1 and 100000000" (clap's own says "invalid
/// digit found in string"). The flag is named by clap around it.
pub fn whole<T>(
    lo: u64,
    hi: u64,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    move |s: &str| {
        let limits = format!("must be a whole number between {lo} and {hi}");
        let n: i128 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a whole number: {limits}"))?;
        if n < i128::from(lo) || n > i128::from(hi) {
            return Err(format!("{n} is not allowed: {limits}"));
        }
        u64::try_from(n)
            .ok()
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| format!("{n} is not allowed: {limits}"))
    }
}

/// A number of seconds for a run: more than 0, at most a day.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        return Err(format!("{s} must be more than 0 and at most 86400 seconds"));
    }
    Ok(v)
}

/// A share: more than 0, at most 1.
pub fn parse_share(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !(v.is_finite() && v > 0.0 && v <= 1.0) {
        return Err(format!("{s} must be more than 0 and at most 1"));
    }
    Ok(v)
}

/// A timeout in seconds: more than 0, at most an hour.
pub fn parse_timeout(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    // A positive value too small for a Duration (below 1 ns) would become a zero timeout.
    if !(v.is_finite() && v > 0.0 && v <= 3600.0) || Duration::from_secs_f64(v).is_zero() {
        return Err(format!("{s} must be more than 0 and at most 3600 seconds"));
    }
    Ok(v)
}

/// The time zone named `name` (`--tz`), or an error naming it.
pub fn time_zone(name: &str) -> dispenser::Result<dispenser::jiff::tz::TimeZone> {
    dispenser::jiff::tz::TimeZone::get(name).map_err(|e| dispenser::Error::InvalidArgument {
        what: "time zone".to_owned(),
        reason: format!("{name:?}: {e}"),
    })
}

/// The day `key` (`YYYY-MM-DD`), or an error naming the flag and the value.
pub fn day(flag: &str, key: &str) -> dispenser::Result<dispenser::jiff::civil::Date> {
    key.parse().map_err(|_| dispenser::Error::InvalidArgument {
        what: flag.to_owned(),
        reason: format!(
            "{key:?} is not a day YYYY-MM-DD (the scopes of a daily sequence are days)"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_name_the_value_and_the_limits() {
        let count = whole::<u64>(1, 5);
        assert_eq!(count("3"), Ok(3));
        assert_eq!(
            count("-1"),
            Err("-1 is not allowed: must be a whole number between 1 and 5".to_owned())
        );
        assert_eq!(
            count("x"),
            Err("\"x\" is not a whole number: must be a whole number between 1 and 5".to_owned())
        );
        assert!(whole::<u32>(0, 10)("99999999999999999999999999999999999999999").is_err());
    }

    #[test]
    fn timeouts_are_checked() {
        assert!(parse_timeout("0").is_err());
        assert!(parse_timeout("nan").is_err());
        assert!(parse_timeout("-1").is_err());
        assert!(parse_timeout("1e-12").is_err(), "rounds to a zero Duration");
        assert_eq!(parse_timeout("2.5"), Ok(2.5));
    }
}
