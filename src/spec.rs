//! What a sequence is: its name and its spec (start, step, bounds, cycle), validated before
//! anything is written.
//!
//! Validation lives here, in one place, so the library and the CLI reject the same inputs
//! with the same messages.

use std::fmt;

use crate::error::{Error, Result};

/// The longest sequence name accepted, in bytes.
pub const MAX_NAME_BYTES: usize = 200;

/// The shape of a sequence: where it starts, how it moves and where it stops or wraps.
///
/// # Default
///
/// `start 1, step 1, min 0, max i64::MAX, cycle false`: an ordinary counter 1, 2, 3, …
///
/// # Example
///
/// A queue-ticket dispenser that issues 1, 2, …, 99, 0, 1, …:
///
/// ```
/// use dispenser::Spec;
///
/// let tickets = Spec::default().with_max(99).with_cycle(true);
/// tickets.validate("tickets")?;
/// assert_eq!((tickets.start, tickets.min, tickets.max), (1, 0, 99));
/// # Ok::<(), dispenser::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Spec {
    /// The first number issued. Defaults to 1.
    pub start: i64,
    /// The distance between consecutive numbers; negative for a descending sequence.
    /// Defaults to 1. Must not be 0.
    pub step: i64,
    /// The lowest number the sequence may issue. Defaults to 0.
    pub min: i64,
    /// The highest number the sequence may issue. Defaults to `i64::MAX`.
    pub max: i64,
    /// Whether to wrap to `min` (to `max` when descending) past the far bound instead of
    /// failing with [`Error::Exhausted`]. Defaults to false.
    pub cycle: bool,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            start: 1,
            step: 1,
            min: 0,
            max: i64::MAX,
            cycle: false,
        }
    }
}

impl Spec {
    /// Sets the first number issued. Defaults to 1.
    #[must_use]
    pub const fn with_start(mut self, start: i64) -> Self {
        self.start = start;
        self
    }

    /// Sets the step. Defaults to 1.
    #[must_use]
    pub const fn with_step(mut self, step: i64) -> Self {
        self.step = step;
        self
    }

    /// Sets the lower bound. Defaults to 0.
    #[must_use]
    pub const fn with_min(mut self, min: i64) -> Self {
        self.min = min;
        self
    }

    /// Sets the upper bound. Defaults to `i64::MAX`.
    #[must_use]
    pub const fn with_max(mut self, max: i64) -> Self {
        self.max = max;
        self
    }

    /// Sets whether the sequence wraps at its bound. Defaults to false.
    #[must_use]
    pub const fn with_cycle(mut self, cycle: bool) -> Self {
        self.cycle = cycle;
        self
    }

    /// Checks the spec for the sequence `name` (the name is only used in the message).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSpec`] when the step is 0, `min >= max`, `start` lies outside
    /// `[min, max]`, or `start - step` (the stored value of a sequence that has issued
    /// nothing yet) does not fit in an `i64`.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::Spec;
    ///
    /// let err = Spec::default().with_min(10).with_max(5).validate("x").unwrap_err();
    /// assert!(err.to_string().contains("min (10) must be below max (5)"));
    /// ```
    pub fn validate(&self, name: &str) -> Result<()> {
        let fail = |reason: String| {
            Err(Error::InvalidSpec {
                name: name.to_owned(),
                reason,
            })
        };
        if self.step == 0 {
            return fail("step must not be 0".into());
        }
        if self.min >= self.max {
            return fail(format!(
                "min ({}) must be below max ({})",
                self.min, self.max
            ));
        }
        if self.start < self.min || self.start > self.max {
            return fail(format!(
                "start ({}) must lie within min..=max ({}..={})",
                self.start, self.min, self.max
            ));
        }
        if self.start.checked_sub(self.step).is_none() {
            return fail(format!(
                "start - step ({} - {}) must fit in a 64-bit integer (it is stored as the value before the first number)",
                self.start, self.step
            ));
        }
        Ok(())
    }

    /// Whether two specs describe the same numbers from now on (the start only matters at
    /// creation, so it is not compared).
    pub(crate) fn same_shape(&self, other: &Spec) -> bool {
        self.step == other.step
            && self.min == other.min
            && self.max == other.max
            && self.cycle == other.cycle
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{step {}, min {}, max {}, cycle {}}}",
            self.step, self.min, self.max, self.cycle
        )
    }
}

/// The first control character of `name` (Unicode `Cc`: U+0000–U+001F, U+007F–U+009F), if
/// it has one: what [`validate_name`] refuses. An ASCII name (the usual one) is scanned byte
/// by byte, which is cheaper than decoding characters on every draw.
fn control_char(name: &str) -> Option<char> {
    if name.is_ascii() {
        return name.bytes().find(u8::is_ascii_control).map(char::from);
    }
    name.chars().find(|c| c.is_control())
}

/// Checks a **stored** name, one that may be read, drawn from, reset or deleted: non-empty, at
/// most [`MAX_NAME_BYTES`] bytes, no control character (no `\n`, `\t`, `\r`, NUL, DEL or any
/// other Unicode control character: they would break line-oriented output such as `list`),
/// not starting with `$`.
///
/// Names the library builds pass it: a scope `tickets@2026-11-22` (see
/// [`scoped_name`](crate::scope::scoped_name)) and a stripe `ids~3` (see
/// [`stripe_name`](crate::stripe::stripe_name)) are opened, peeked and deleted by their full name.
/// Names users **create** must pass [`validate_plain_name`] too.
///
/// # Errors
///
/// [`Error::InvalidName`] saying which rule the name breaks.
///
/// # Example
///
/// ```
/// assert!(dispenser::sequence::validate_name("orders").is_ok());
/// assert!(dispenser::sequence::validate_name("tickets@2026-11-22").is_ok());
/// assert!(dispenser::sequence::validate_name("$where").is_err());
/// assert!(dispenser::sequence::validate_name("multi\nline").is_err());
/// ```
pub fn validate_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "must not be empty".to_owned()
    } else if name.len() > MAX_NAME_BYTES {
        format!(
            "is {} bytes long; at most {MAX_NAME_BYTES} are allowed",
            name.len()
        )
    } else if let Some(c) = control_char(name) {
        format!(
            "must not contain a control character (found {})",
            c.escape_unicode()
        )
    } else if name.starts_with('$') {
        "must not start with '$'".to_owned()
    } else {
        return Ok(());
    };
    Err(invalid(name, reason))
}

/// Checks a name a user may **create** directly (a plain sequence, a scope template, the
/// base name of a striped sequence): [`validate_name`], and no `@` (the
/// [`SCOPE_SEPARATOR`](crate::scope::SCOPE_SEPARATOR)) or `~` (the stripe separator), so that a
/// plain `ids~1` never shares a document with stripe 1 of `ids`, nor `t@x` with scope `x`
/// of `t`.
///
/// # Errors
///
/// [`Error::InvalidName`] saying which rule the name breaks and, for a separator, what to
/// call instead.
///
/// # Example
///
/// ```
/// assert!(dispenser::sequence::validate_plain_name("orders").is_ok());
/// let err = dispenser::sequence::validate_plain_name("tickets@acme").unwrap_err();
/// assert!(err.to_string().contains("use ensure_scope(template, key)"));
/// assert!(dispenser::sequence::validate_plain_name("ids~1").is_err());
/// ```
pub fn validate_plain_name(name: &str) -> Result<()> {
    validate_name(name)?;
    if name.contains('@') {
        return Err(invalid(
            name,
            "must not contain '@': '@' separates a template from its scope: use \
             ensure_scope(template, key)"
                .to_owned(),
        ));
    }
    if name.contains('~') {
        return Err(invalid(
            name,
            "must not contain '~': '~' separates a striped sequence from its stripe number: \
             use Dispenser::ensure_striped(name, stripes, spec)"
                .to_owned(),
        ));
    }
    Ok(())
}

/// What a stored sequence name names, by its separators (the glossary's table of names says
/// why each is unambiguous):
///
/// - a name with `@` whose part before the first `@` is a plain name (a template has no `@`
///   and no `~`) and whose part after it is not empty: that **scope** of that template — the
///   key may hold anything, `@` and `~` included (`t@a~1` is scope `a~1` of `t`: a scope is
///   never striped);
/// - else a name `BASE~I`, `BASE` a plain name and `I` a stripe number written as the
///   library writes it (`0`, or digits not starting with `0`): stripe `I` of the striped
///   sequence `BASE`;
/// - any other name: itself, a plain sequence (or a name no document of this library has,
///   such as `a~b`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NameParts<'a> {
    /// A plain sequence (or a striped one as a whole, or a template).
    Plain(&'a str),
    /// Stripe `.1` of the striped sequence `.0`.
    Stripe(&'a str, u32),
    /// Scope key `.1` of template `.0`.
    Scope(&'a str, &'a str),
}

/// The parts of the stored sequence name `name` (see [`NameParts`]).
pub(crate) fn name_parts(name: &str) -> NameParts<'_> {
    if let Some((template, key)) = name.split_once('@') {
        return if validate_plain_name(template).is_ok() && !key.is_empty() {
            NameParts::Scope(template, key)
        } else {
            NameParts::Plain(name)
        };
    }
    if let Some((base, index)) = name.split_once('~') {
        let canonical =
            index == "0" || (!index.starts_with('0') && index.bytes().all(|b| b.is_ascii_digit()));
        if let Ok(i) = index.parse::<u32>()
            && canonical
            && validate_plain_name(base).is_ok()
        {
            return NameParts::Stripe(base, i);
        }
    }
    NameParts::Plain(name)
}

fn invalid(name: &str, reason: String) -> Error {
    let shown: String = name.chars().take(64).collect();
    Error::InvalidName {
        kind: crate::error::Kind::Sequence,
        name: shown,
        reason,
    }
}

/// The MongoDB regular expression of the names matched by any of `patterns` — `*` any run
/// of characters, `?` one character, everything else itself (the patterns of the service's
/// tokens) — or `None` when a pattern is `*` alone (every name). Anchored at both ends, so a
/// listing filtered by it returns exactly the names the patterns match, read by the server
/// from the `_id` index: what a caller may not see is never read.
pub(crate) fn names_regex(patterns: &[&str]) -> Option<String> {
    if patterns.contains(&"*") {
        return None;
    }
    let mut out = String::from("^(?:");
    for (i, p) in patterns.iter().enumerate() {
        if i > 0 {
            out.push('|');
        }
        for c in p.chars() {
            match c {
                '*' => out.push_str("[\\s\\S]*"),
                '?' => out.push_str("[\\s\\S]"),
                '\\' | '^' | '$' | '.' | '|' | '+' | '(' | ')' | '[' | ']' | '{' | '}' | '#'
                | '-' | ' ' => {
                    out.push('\\');
                    out.push(c);
                }
                c => out.push(c),
            }
        }
    }
    // A pattern list that matches nothing still yields a valid expression.
    if patterns.is_empty() {
        out.push_str("(?!)");
    }
    out.push_str(")\\z");
    Some(out)
}

/// The document name of stripe `i` of `name`.
///
/// # Example
///
/// ```
/// assert_eq!(dispenser::stripe::stripe_name("ids", 3), "ids~3");
/// ```
pub fn stripe_name(name: &str, i: u32) -> String {
    format!("{name}~{i}")
}

/// What [`Sequence::reset`](crate::Sequence::reset) sets: the number issued next, and whether it may move the
/// sequence backwards (so that numbers already issued come again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reset {
    /// The number the sequence issues next.
    pub(crate) next: i64,
    /// Allow moving backwards.
    pub(crate) force: bool,
}

impl Reset {
    /// A reset to `next`, refused if it would move the sequence backwards.
    pub(crate) fn to(next: i64) -> Self {
        Reset { next, force: false }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_spec_is_valid() {
        assert!(Spec::default().validate("a").is_ok());
    }

    #[test]
    fn invalid_specs_are_rejected_with_the_field_named() {
        let cases = [
            (Spec::default().with_step(0), "step must not be 0"),
            (
                Spec::default().with_min(5).with_max(5),
                "min (5) must be below max (5)",
            ),
            (Spec::default().with_start(-1), "start (-1) must lie within"),
            (
                Spec::default().with_max(10).with_start(11),
                "start (11) must lie within",
            ),
            (
                Spec::default().with_min(i64::MIN).with_start(i64::MIN),
                "start - step",
            ),
            (
                Spec::default().with_step(-1).with_start(i64::MAX),
                "start - step",
            ),
        ];
        for (spec, needle) in cases {
            let err = spec.validate("s").unwrap_err();
            assert!(matches!(err, Error::InvalidSpec { .. }), "{spec}");
            assert!(err.to_string().contains(needle), "{err} lacks {needle}");
        }
    }

    #[test]
    fn names_are_checked() {
        assert!(validate_name("tickets-2026/01").is_ok());
        assert!(validate_name(&"x".repeat(MAX_NAME_BYTES)).is_ok());
        for (bad, needle) in [
            ("", "empty"),
            ("a\0b", "control character"),
            ("a\nb", "control character"),
            ("a\tb", "control character"),
            ("a\rb", "control character"),
            ("a\u{7f}b", "control character"),
            ("a\u{85}b", "control character"),
            ("$x", "'$'"),
        ] {
            let err = validate_name(bad).unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
            assert_eq!(err.to_string().lines().count(), 1, "{err}");
            assert!(validate_plain_name(bad).is_err());
        }
        // Stored names the library builds are valid names, but not plain ones.
        for built in ["tickets@2026-11-22", "ids~3", "t@a@b"] {
            assert!(validate_name(built).is_ok(), "{built}");
            assert!(validate_plain_name(built).is_err(), "{built}");
        }
        let err = validate_plain_name("x@y").unwrap_err().to_string();
        assert!(err.contains("ensure_scope(template, key)"), "{err}");
        let err = validate_plain_name("q~0").unwrap_err().to_string();
        assert!(err.contains("Dispenser::ensure_striped"), "{err}");
        assert!(validate_plain_name("tickets-2026/01 é").is_ok());
        let long = "é".repeat(101);
        assert!(
            validate_name(&long)
                .unwrap_err()
                .to_string()
                .contains("202 bytes")
        );
    }

    #[test]
    fn a_stored_name_says_what_it_names() {
        use NameParts::{Plain, Scope, Stripe};
        for (name, parts) in [
            ("orders", Plain("orders")),
            ("ids~0", Stripe("ids", 0)),
            ("ids~17", Stripe("ids", 17)),
            ("t@2026-11-22", Scope("t", "2026-11-22")),
            // The key holds anything after the first `@`: a scope is never striped.
            ("t@a~1", Scope("t", "a~1")),
            ("t@ann@example.com", Scope("t", "ann@example.com")),
            // Names no document of the library has are themselves, never a prefix.
            ("ids~01", Plain("ids~01")),
            ("ids~", Plain("ids~")),
            ("ids~-1", Plain("ids~-1")),
            ("ids~1~2", Plain("ids~1~2")),
            ("a~b", Plain("a~b")),
            ("~1", Plain("~1")),
            ("@k", Plain("@k")),
            ("t@", Plain("t@")),
            ("a~1@k", Plain("a~1@k")),
            ("ids~99999999999", Plain("ids~99999999999")),
        ] {
            assert_eq!(name_parts(name), parts, "{name}");
        }
    }

    #[test]
    fn same_shape_ignores_start() {
        let a = Spec::default().with_max(99);
        assert!(a.same_shape(&a.with_start(5)));
        assert!(!a.same_shape(&a.with_cycle(true)));
    }
}
