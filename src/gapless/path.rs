//! Dotted field paths (`number`, `meta.number`) in documents: read one, set one.

use bson::{Bson, Document};

use crate::error::{Error, Result};

/// The value at a dotted `path` of `doc` (`None` when a step is missing or not a document).
pub(super) fn at_path<'d>(doc: &'d Document, path: &str) -> Option<&'d Bson> {
    let mut parts = path.split('.');
    let mut cur = doc.get(parts.next()?)?;
    for p in parts {
        cur = cur.as_document()?.get(p)?;
    }
    Some(cur)
}

/// The number a business document carries at the dotted `path`: `Ok(Some(n))` for an
/// Int32, an Int64 or a Double without a fraction (the unique index sees all three as the
/// integer n); `Ok(None)` when the path is missing or holds something no integer equals (a
/// string, a fraction, a document, null). `Err(problem)` when it holds what the unique index
/// and the queries may see as a number but a gap-free sequence cannot read as one: a
/// `Decimal128`, or an array (at the field or on the way to it) — such a document wedges a
/// sequence at its number, so it is reported, never skipped.
pub(super) fn number_in(doc: &Document, path: &str) -> std::result::Result<Option<i64>, String> {
    let mut parts = path.split('.');
    let Some(first) = parts.next() else {
        return Ok(None);
    };
    let mut cur = doc.get(first);
    let mut at = first.to_owned();
    for p in parts {
        cur = match cur {
            None => return Ok(None),
            Some(Bson::Document(d)) => d.get(p),
            Some(Bson::Array(_)) => {
                return Err(format!(
                    "{at:?} holds an array (the number must be one integer, not inside an array)"
                ));
            }
            Some(_) => return Ok(None),
        };
        at = format!("{at}.{p}");
    }
    match cur {
        None => Ok(None),
        Some(Bson::Int32(i)) => Ok(Some(i64::from(*i))),
        Some(Bson::Int64(i)) => Ok(Some(*i)),
        Some(Bson::Double(d)) if d.fract() == 0.0 && d.abs() < 9.0e18 => Ok(Some(*d as i64)),
        Some(Bson::Decimal128(d)) => Err(format!(
            "holds Decimal128(\"{d}\"), not a 64-bit integer (store numbers as NumberLong or int)"
        )),
        Some(Bson::Array(a)) => Err(format!(
            "holds an array ({}), not one integer",
            describe(&Bson::Array(a.clone()))
        )),
        Some(_) => Ok(None),
    }
}

/// Sets the field at the dotted path `field` of `doc` to `value`, creating the documents on
/// the way (`meta.number` sets `number` inside `meta`, not a top-level key named
/// `"meta.number"`, which a unique index on the path would see as missing). Other fields of
/// those documents are kept.
///
/// A closure given to [`Gapless::issue`](super::Gapless::issue) that builds its document
/// from a template can use it to put the number where the unique index looks.
///
/// # Errors
///
/// [`Error::InvalidArgument`] when a step of the path holds something that is not a
/// document (naming the step and what it holds), or the path is empty or has an empty
/// step; `doc` is then unchanged.
///
/// # Example
///
/// ```
/// use dispenser::gapless::set_field;
/// use dispenser::mongodb::bson::doc;
///
/// let mut invoice = doc! { "meta": { "customer": "ACME" } };
/// set_field(&mut invoice, "meta.number", 42_i64)?;
/// assert_eq!(invoice, doc! { "meta": { "customer": "ACME", "number": 42_i64 } });
/// # Ok::<(), dispenser::Error>(())
/// ```
pub fn set_field(doc: &mut Document, field: &str, value: impl Into<Bson>) -> Result<()> {
    let parts: Vec<&str> = field.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(Error::invalid_argument(
            "field path",
            format!("{field:?} is not a field path (such as `number` or `meta.number`)"),
        ));
    }
    // Check first, so that a refused path leaves the document as it was.
    let mut cur = Some(&*doc);
    for (i, p) in parts[..parts.len() - 1].iter().enumerate() {
        match cur.and_then(|d| d.get(*p)) {
            None => cur = None,
            Some(Bson::Document(d)) => cur = Some(d),
            Some(other) => {
                return Err(Error::invalid_argument(
                    "field path",
                    format!(
                        "cannot set {field:?}: {:?} holds {}, not a document",
                        parts[..=i].join("."),
                        describe(other)
                    ),
                ));
            }
        }
    }
    let mut cur = doc;
    for p in &parts[..parts.len() - 1] {
        if !matches!(cur.get(*p), Some(Bson::Document(_))) {
            cur.insert(*p, Document::new());
        }
        cur = match cur.get_mut(*p) {
            Some(Bson::Document(d)) => d,
            _ => {
                return Err(Error::invalid_argument(
                    "field path",
                    format!("cannot set {field:?}"),
                ));
            }
        };
    }
    cur.insert(parts[parts.len() - 1], value.into());
    Ok(())
}

fn describe(v: &Bson) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!("a {:?}", v.element_type())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn nested_paths_are_set_and_read() {
        let mut d = doc! { "total": 5 };
        set_field(&mut d, "number", 1_i64).unwrap();
        set_field(&mut d, "meta.number", 2_i64).unwrap();
        set_field(&mut d, "meta.deep.n", 3_i64).unwrap();
        assert_eq!(
            d,
            doc! { "total": 5, "number": 1_i64, "meta": { "number": 2_i64, "deep": { "n": 3_i64 } } }
        );
        assert_eq!(at_path(&d, "meta.deep.n"), Some(&Bson::Int64(3)));
        assert_eq!(at_path(&d, "meta.x"), None);
        assert_eq!(at_path(&d, "total.x"), None);
    }

    #[test]
    fn numbers_of_another_type_or_shape_are_problems_not_numbers() {
        let dec = "3".parse::<bson::Decimal128>().unwrap();
        assert_eq!(number_in(&doc! { "n": 3_i64 }, "n"), Ok(Some(3)));
        assert_eq!(number_in(&doc! { "n": 3 }, "n"), Ok(Some(3)));
        assert_eq!(number_in(&doc! { "n": 3.0 }, "n"), Ok(Some(3)));
        assert_eq!(number_in(&doc! { "n": 3.5 }, "n"), Ok(None));
        assert_eq!(number_in(&doc! { "n": "3" }, "n"), Ok(None));
        assert_eq!(number_in(&doc! { "m": 3 }, "n"), Ok(None));
        assert!(
            number_in(&doc! { "n": dec }, "n")
                .unwrap_err()
                .contains("Decimal128")
        );
        assert!(
            number_in(&doc! { "n": [3] }, "n")
                .unwrap_err()
                .contains("array")
        );
        let e = number_in(&doc! { "a": [{ "n": 3 }] }, "a.n").unwrap_err();
        assert!(e.contains("\"a\" holds an array"), "{e}");
        assert_eq!(number_in(&doc! { "a": { "n": 4 } }, "a.n"), Ok(Some(4)));
        assert_eq!(number_in(&doc! { "a": 1 }, "a.n"), Ok(None));
    }

    #[test]
    fn a_step_that_is_not_a_document_is_refused_and_nothing_changes() {
        let mut d = doc! { "meta": 7, "a": { "b": "x" } };
        let before = d.clone();
        let e = set_field(&mut d, "meta.number", 1_i64).unwrap_err();
        assert!(e.to_string().contains("\"meta\" holds 7"), "{e}");
        let e = set_field(&mut d, "a.b.c", 1_i64).unwrap_err();
        assert!(e.to_string().contains("\"a.b\" holds \"x\""), "{e}");
        let e = set_field(&mut d, "a..c", 1_i64).unwrap_err();
        assert!(e.to_string().contains("not a field path"), "{e}");
        assert_eq!(d, before);
    }
}
