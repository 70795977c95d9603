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
