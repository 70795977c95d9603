//! Formatted serials: human-facing text for a number, such as `A-007` or `INV-2026-000123`.
//!
//! Numbers stay integers in the database; a format is stored beside them (the optional
//! `format` field of the sequence document) and applied when a number is shown. Rendering is
//! pure and cannot fail once the format has been parsed.

use std::fmt;

use crate::error::{Error, Result};

const MAX_PAD: usize = Format::MAX_PAD;
const MAX_FORMAT_BYTES: usize = Format::MAX_BYTES;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Text(String),
    Number { pad: usize },
    Scope,
}

/// A parsed serial format: literal text with `{n}` (the number), `{n:0W}` (the number
/// zero-padded to W characters, sign included, W ≤ 20), and `{scope}` (the scope key, or the
/// empty text for an unscoped sequence). `{{` and `}}` are literal braces.
///
/// # Example
///
/// ```
/// use dispenser::Format;
///
/// let f = Format::parse("INV-{scope}-{n:06}")?;
/// assert_eq!(f.render(123, Some("2026")), "INV-2026-000123");
/// assert_eq!(Format::parse("A-{n:03}")?.render(7, None), "A-007");
/// assert_eq!(Format::parse("{n:05}")?.render(-42, None), "-0042");
/// # Ok::<(), dispenser::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    source: String,
    pieces: Vec<Piece>,
}

impl Format {
    /// The widest zero padding accepted (an `i64` has at most 19 digits and a sign).
    pub const MAX_PAD: usize = 20;
    /// The longest format accepted, in bytes.
    pub const MAX_BYTES: usize = 200;

    /// Parses a format.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the problem: an unknown placeholder, an unclosed or
    /// unmatched brace, a padding wider than [`Format::MAX_PAD`], no `{n}` at all (every serial must
    /// contain its number, or two numbers could render the same), or a format longer than
    /// [`Format::MAX_BYTES`] bytes or containing a control character (NUL, a newline, an escape).
    pub fn parse(source: &str) -> Result<Format> {
        let fail = |reason: String| {
            Err(Error::invalid_argument(
                format!("format {source:?}"),
                reason,
            ))
        };
        if source.len() > MAX_FORMAT_BYTES {
            return fail(format!("is longer than {MAX_FORMAT_BYTES} bytes"));
        }
        // A label is printed on terminals, boards and receipts: a control character (an
        // escape sequence, a newline) would repaint a terminal or split a line.
        if let Some(c) = source.chars().find(|c| c.is_control()) {
            return fail(format!(
                "contains the control character {:?}; a format is one line of printable text",
                c
            ));
        }
        // A bidirectional control (the embeddings, overrides and isolates, and the marks)
        // reorders the text around it where a board shows it: `A-{n}` could read as another
        // ticket.
        if let Some(c) = source.chars().find(|c| is_bidi_control(*c)) {
            return fail(format!(
                "contains the bidirectional control U+{:04X}, which reorders what a board shows; a format is text read left to right as written",
                u32::from(c)
            ));
        }
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut chars = source.chars().peekable();
        let mut numbers = 0;
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    text.push('}');
                }
                '}' => {
                    return fail("has a '}' without '{' (write '}}' for a literal brace)".into());
                }
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(ch) => name.push(ch),
                            None => return fail("has an unclosed '{'".into()),
                        }
                    }
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(match name.as_str() {
                        "n" => {
                            numbers += 1;
                            Piece::Number { pad: 0 }
                        }
                        "scope" => Piece::Scope,
                        other => match other.strip_prefix("n:0") {
                            Some(width) => {
                                let pad: usize = match width.parse() {
                                    Ok(w) if (1..=MAX_PAD).contains(&w) => w,
                                    _ => {
                                        return fail(format!(
                                            "{{{other}}} needs a width from 1 to {MAX_PAD}, as in {{n:06}}"
                                        ));
                                    }
                                };
                                numbers += 1;
                                Piece::Number { pad }
                            }
                            None => {
                                return fail(format!(
                                    "has an unknown placeholder {{{other}}} (known: {{n}}, {{n:0W}}, {{scope}})"
                                ));
                            }
                        },
                    });
                }
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        if numbers == 0 {
            return fail("has no {n}: every serial must contain its number".into());
        }
        Ok(Format {
            source: source.to_owned(),
            pieces,
        })
    }

    /// The format as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the format has a `{scope}` placeholder.
    ///
    /// # Example
    ///
    /// ```
    /// # use dispenser::Format;
    /// assert!(Format::parse("INV-{scope}-{n:06}")?.uses_scope());
    /// assert!(!Format::parse("T{n}")?.uses_scope());
    /// # Ok::<(), dispenser::Error>(())
    /// ```
    pub fn uses_scope(&self) -> bool {
        self.pieces.iter().any(|p| matches!(p, Piece::Scope))
    }

    /// Renders `n` like [`Format::render`], but refuses to leave `{scope}` empty.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when the format has
    /// `{scope}` and `scope` is `None` (an unscoped draw would print `INV--000001`).
    ///
    /// # Example
    ///
    /// ```
    /// # use dispenser::Format;
    /// let f = Format::parse("INV-{scope}-{n:06}")?;
    /// assert_eq!(f.try_render(7, Some("2026"))?, "INV-2026-000007");
    /// assert_eq!(f.try_render(7, None).unwrap_err().kind(), dispenser::ErrorKind::InvalidInput);
    /// # Ok::<(), dispenser::Error>(())
    /// ```
    pub fn try_render(&self, n: i64, scope: Option<&str>) -> Result<String> {
        if scope.is_none() && self.uses_scope() {
            return Err(Error::InvalidArgument {
                what: "scope".into(),
                reason: format!(
                    "format {:?} has {{scope}} but the number was not drawn from a scope",
                    self.source
                ),
            });
        }
        Ok(self.render(n, scope))
    }

    /// Renders `n` (and the scope key, if any; `{scope}` is empty without one).
    pub fn render(&self, n: i64, scope: Option<&str>) -> String {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Number { pad } => out.push_str(&format!("{n:0pad$}")),
                Piece::Scope => out.push_str(scope.unwrap_or("")),
            }
        }
        out
    }
}

/// The bidirectional formatting characters: the marks (U+061C, U+200E, U+200F), the
/// embeddings and overrides (U+202A–U+202E) and the isolates (U+2066–U+2069).
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_padding_scope_and_braces() {
        let f = Format::parse("{{{scope}}}#{n:04}").unwrap();
        assert_eq!(f.render(5, Some("x")), "{x}#0005");
        assert_eq!(f.render(123_456, None), "{}#123456");
    }

    #[test]
    fn the_widest_values_render_exactly() {
        let f = Format::parse("{n:020}").unwrap();
        assert_eq!(f.render(i64::MIN, None), "-9223372036854775808");
        assert_eq!(f.render(i64::MAX, None), "09223372036854775807");
        assert_eq!(f.render(-1, None), "-0000000000000000001");
        assert_eq!(
            Format::parse("{n}").unwrap().render(i64::MIN, None),
            i64::MIN.to_string()
        );
    }

    #[test]
    fn negative_steps_count_down_in_text() {
        let f = Format::parse("T{n:03}").unwrap();
        let shown: Vec<_> = [2, 1, 0, -1].iter().map(|n| f.render(*n, None)).collect();
        assert_eq!(shown, vec!["T002", "T001", "T000", "T-01"]);
    }

    #[test]
    fn bad_formats_are_named() {
        for (bad, needle) in [
            ("A-{x}", "unknown placeholder {x}"),
            ("A-{n", "unclosed"),
            ("A-}n", "without '{'"),
            ("A-{n:021}", "width from 1 to 20"),
            ("A-{n:0}", "width from 1 to 20"),
            ("A-{n:6}", "unknown placeholder"),
            ("plain", "has no {n}"),
            ("{scope}", "has no {n}"),
            // Regression (issue 37, 10): terminal escapes and line breaks in a label.
            ("A\u{1b}[31mRED\u{1b}[0m-{n}", "control character"),
            ("A-{n}\nB", "control character"),
            ("A-{n}\u{0}", "control character"),
            ("A-{n}\u{85}", "control character"),
            // Regression (issue 59, 6): bidirectional controls reorder what the board shows.
            ("A-\u{202E}{n}", "bidirectional control U+202E"),
            ("\u{2066}A-{n}\u{2069}", "bidirectional control U+2066"),
            ("A-{n}\u{200F}", "bidirectional control U+200F"),
            ("A\u{061C}-{n}", "bidirectional control U+061C"),
        ] {
            let err = Format::parse(bad).unwrap_err();
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
        assert!(Format::parse(&"x".repeat(201)).is_err());
    }

    #[test]
    fn distinct_numbers_render_distinctly() {
        let f = Format::parse("A-{n:02}").unwrap();
        let mut seen = std::collections::HashSet::new();
        for n in -150..150 {
            assert!(seen.insert(f.render(n, None)), "{n}");
        }
    }
}
