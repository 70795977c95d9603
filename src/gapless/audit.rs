//! Gaps, duplicates and voids of a number field in any collection: one sorted scan.

use bson::{Bson, Document, doc};
use futures::TryStreamExt;
use mongodb::Collection;
use mongodb::options::ReadConcern;

use super::path::{at_path, number_in};
use crate::error::{Aftermath, Error, Result};

/// How many gap ranges and duplicated numbers an [`Audit`] lists (the counts are always
/// complete).
pub const AUDIT_LIST_LIMIT: usize = 1000;

/// What [`audit`] found in one collection.
///
/// # Example
///
/// ```no_run
/// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
/// use dispenser::gapless::{AuditOptions, audit};
/// let o = g.options();
/// let a = audit(g.business(), &o.field, &AuditOptions::default().with_void_field(&o.void_field)).await?;
/// if !a.is_clean() {
///     println!("{} missing, {} duplicated", a.missing, a.duplicated);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Audit {
    /// Documents whose field holds an integer (at or above `from`).
    pub numbers: u64,
    /// The smallest and the largest number found.
    pub first: Option<i64>,
    /// The largest number found.
    pub last: Option<i64>,
    /// Numbers between `first` (or `from`) and `last` that no document carries.
    pub missing: u64,
    /// The missing numbers as inclusive ranges, in order (at most [`AUDIT_LIST_LIMIT`]).
    pub gaps: Vec<(i64, i64)>,
    /// How many documents carry a number another document carries too (beyond the first).
    pub duplicated: u64,
    /// The duplicated numbers and how many documents carry each (at most
    /// [`AUDIT_LIST_LIMIT`]).
    pub duplicates: Vec<(i64, u64)>,
    /// Documents whose field holds something that is not an integer (a fractional number,
    /// a string, …); they are not counted as numbers.
    pub not_integer: u64,
    /// How many of the numbers are carried by void documents (see
    /// [`GaplessOptions::void_field`](super::GaplessOptions::void_field)): accounted for,
    /// voided on purpose, not used.
    pub voided: u64,
    /// The voided numbers, in order (at most [`AUDIT_LIST_LIMIT`]).
    pub voids: Vec<i64>,
    /// Documents whose field holds a number of another type (a `Decimal128`) or shape (an
    /// array, or an array on the way to a nested field): the unique index and the queries
    /// see a number there that a gap-free sequence cannot read, so it would stop at that
    /// number. A problem: [`is_clean`](Audit::is_clean) is false while there is one.
    pub malformed: u64,
    /// The malformed documents: their `_id` (as extended JSON text, such as `"inv-7"` or
    /// `ObjectId("…")`) and what their field holds (at most [`AUDIT_LIST_LIMIT`]).
    pub malformed_docs: Vec<(String, String)>,
}

/// What an [`audit`] expects.
///
/// | field | default |
/// |---|---|
/// | `from` | none (the smallest number found starts the range) |
/// | `void_field` | `voided` (a document whose field holds `{reason: <string>, …}` is a void) |
///
/// # Example
///
/// ```
/// let o = dispenser::gapless::AuditOptions::default().with_from(1).with_void_field("void");
/// assert_eq!(o.from, Some(1));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditOptions {
    /// The first number expected; numbers below are ignored. Defaults to none: the smallest
    /// number found.
    pub from: Option<i64>,
    /// The field marking void documents: one whose value there is a document with a string
    /// `reason` counts as voided (`None`: no document does). Defaults to `voided`, as
    /// [`GaplessOptions`](super::GaplessOptions) writes them.
    pub void_field: Option<String>,
    /// How long each database operation of the audit (the query, each batch of its
    /// cursor) may take before the audit fails with [`Error::Timeout`]. Defaults to 10 s.
    pub timeout: std::time::Duration,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            from: None,
            void_field: Some("voided".to_owned()),
            timeout: std::time::Duration::from_secs(10),
        }
    }
}

impl AuditOptions {
    /// Sets the first number expected.
    #[must_use]
    pub fn with_from(mut self, from: i64) -> Self {
        self.from = Some(from);
        self
    }

    /// Sets how long each database operation of the audit may take.
    #[must_use]
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the field marking void documents.
    #[must_use]
    pub fn with_void_field(mut self, field: impl Into<String>) -> Self {
        self.void_field = Some(field.into());
        self
    }

    /// No document counts as a void.
    ///
    /// # Example
    ///
    /// ```
    /// let o = dispenser::gapless::AuditOptions::default().without_voids();
    /// assert_eq!(o.void_field, None);
    /// ```
    #[must_use]
    pub fn without_voids(mut self) -> Self {
        self.void_field = None;
        self
    }
}

impl Audit {
    /// No gap, no duplicate and no malformed number.
    ///
    /// # Example
    ///
    /// ```
    /// assert!(dispenser::gapless::Audit::default().is_clean());
    /// ```
    pub fn is_clean(&self) -> bool {
        self.missing == 0 && self.duplicated == 0 && self.malformed == 0
    }

    /// Whether `n` is in one of the listed gaps.
    pub fn is_missing(&self, n: i64) -> bool {
        self.gaps.iter().any(|&(a, b)| (a..=b).contains(&n))
    }

    fn add_void(&mut self, n: i64) {
        self.voided += 1;
        if self.voids.len() < AUDIT_LIST_LIMIT {
            self.voids.push(n);
        }
    }

    fn add(&mut self, n: i64, from: Option<i64>) {
        let expected = match self.last {
            Some(last) => Some(i128::from(last) + 1),
            None => from.map(i128::from),
        };
        if self.last == Some(n) {
            self.duplicated += 1;
            let room = self.duplicates.len() < AUDIT_LIST_LIMIT;
            match self.duplicates.last_mut() {
                Some((d, c)) if *d == n => *c += 1,
                _ if room => self.duplicates.push((n, 2)),
                _ => {}
            }
            self.numbers += 1;
            return;
        }
        if let Some(e) = expected
            && i128::from(n) > e
        {
            let missing = i128::from(n) - e;
            self.missing = self
                .missing
                .saturating_add(u64::try_from(missing).unwrap_or(u64::MAX));
            if self.gaps.len() < AUDIT_LIST_LIMIT {
                // `e` ≤ n - 1 fits in i64.
                self.gaps
                    .push((i64::try_from(e).unwrap_or(n), n.saturating_sub(1)));
            }
        }
        self.first.get_or_insert(n);
        self.last = Some(n);
        self.numbers += 1;
    }
}

/// Audits `field` of the documents of `business`: every number from `options.from` (or the
/// smallest found) to the largest found should be carried by exactly one document — a
/// business document, or a void document (counted in [`Audit::voided`] and listed in
/// [`Audit::voids`]). Documents without the field are ignored; a number of another type
/// (`Decimal128`) or shape (an array) is a problem ([`Audit::malformed`], by `_id`). One scan sorted on the field
/// (an index on it makes it cheap; without one the server sorts, with `allowDiskUse`), read
/// with majority read concern: what it reports cannot be rolled back.
///
/// This is the one way to audit, whatever wrote the numbers: a [`Gapless`](super::Gapless)
/// handle names its collection and field ([`Gapless::business`](super::Gapless::business),
/// [`GaplessOptions::field`](super::GaplessOptions::field)).
///
/// # Errors
///
/// [`Error::InvalidArgument`] for an empty collection, field or void field name,
/// [`Error::Database`] when the scan fails.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
///
/// # Example
///
/// ```no_run
/// # async fn f(client: dispenser::mongodb::Client) -> dispenser::Result<()> {
/// use dispenser::gapless::{AuditOptions, audit};
/// use dispenser::mongodb::bson::Document;
/// let invoices = client.database("shop").collection::<Document>("invoices");
/// let a = audit(&invoices, "number", &AuditOptions::default().with_from(1)).await?;
/// println!("{} numbers ({} voided), {} missing", a.numbers, a.voided, a.missing);
/// assert!(a.is_clean(), "{a:?}");
/// # Ok(()) }
/// ```
pub async fn audit(
    business: &Collection<Document>,
    field: &str,
    options: &AuditOptions,
) -> Result<Audit> {
    let collection = business.name();
    let void_field = options.void_field.as_deref();
    let bad = |f: &str| f.is_empty() || f.starts_with('$');
    if collection.is_empty() || bad(field) || void_field.is_some_and(bad) {
        return Err(Error::invalid_argument(
            "audit",
            format!(
                "collection {collection:?}, field {field:?} and void field {void_field:?} must be non-empty names"
            ),
        ));
    }
    let coll = business;
    let from = options.from;
    let filter = match from {
        Some(f) => doc! { field: { "$gte": f } },
        None => doc! { field: { "$exists": true } },
    };
    let mut projection = doc! { field: 1, "_id": 1 };
    if let Some(v) = void_field {
        projection.insert(v, 1);
    }
    let context = || format!("auditing {field:?} of collection {collection:?}");
    // Each operation within the timeout: the query, then each batch.
    let query = coll
        .find(filter)
        .sort(doc! { field: 1 })
        .projection(projection)
        .read_concern(ReadConcern::majority())
        .allow_disk_use(true)
        .into_future();
    let mut cursor = bounded(options.timeout, &context, query).await?;
    let mut a = Audit::default();
    // The server sorts numbers of different types together, but non-numbers apart; a
    // double with a fraction is counted apart.
    while let Some(d) = bounded_next(options.timeout, &context, &mut cursor).await? {
        match number_in(&d, field) {
            Ok(Some(n)) => {
                a.add(n, from);
                if void_field.is_some_and(|v| is_void(&d, v)) {
                    a.add_void(n);
                }
            }
            Ok(None) => a.not_integer += 1,
            Err(problem) => {
                a.malformed += 1;
                if a.malformed_docs.len() < AUDIT_LIST_LIMIT {
                    let id = d.get("_id").map_or_else(|| "?".to_owned(), Bson::to_string);
                    a.malformed_docs.push((id, problem));
                }
            }
        }
    }
    Ok(a)
}

/// Whether `d` is a void document: its `void_field` holds a document with a string `reason`.
pub(super) fn is_void(d: &Document, void_field: &str) -> bool {
    at_path(d, void_field)
        .and_then(Bson::as_document)
        .is_some_and(|v| v.get_str("reason").is_ok())
}

/// `op` within `timeout`, its errors said with `context` (an audit only reads).
async fn bounded<T>(
    timeout: std::time::Duration,
    context: &(dyn Fn() -> String + Sync),
    op: impl IntoFuture<Output = mongodb::error::Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(timeout, op.into_future()).await {
        Ok(r) => r.map_err(|e| Error::database(context(), e)),
        Err(_) => Err(Error::timeout(context(), timeout, Aftermath::Read)),
    }
}

/// The cursor's next document within `timeout` (a batch from the server, when it needs one).
async fn bounded_next(
    timeout: std::time::Duration,
    context: &(dyn Fn() -> String + Sync),
    cursor: &mut mongodb::Cursor<Document>,
) -> Result<Option<Document>> {
    bounded(timeout, context, cursor.try_next()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ns: &[i64], from: Option<i64>) -> Audit {
        let mut a = Audit::default();
        for &n in ns {
            a.add(n, from);
        }
        a
    }

    #[test]
    fn gaps_and_duplicates_are_found_and_counted() {
        let a = run(&[1, 2, 3], Some(1));
        assert!(a.is_clean());
        assert_eq!((a.first, a.last, a.numbers), (Some(1), Some(3), 3));
        let a = run(&[2, 3, 3, 3, 7, 8, 8], Some(1));
        assert_eq!(a.gaps, vec![(1, 1), (4, 6)]);
        assert_eq!(a.missing, 4);
        assert_eq!(a.duplicates, vec![(3, 3), (8, 2)]);
        assert_eq!(a.duplicated, 3);
        assert!(a.is_missing(5) && !a.is_missing(7));
        // Without `from`, the first number found starts the range.
        assert!(run(&[5, 6], None).is_clean());
        // The whole i64 range: no overflow.
        let a = run(&[i64::MIN, i64::MAX], None);
        assert_eq!(a.missing, u64::MAX - 1);
        assert_eq!(a.gaps, vec![(i64::MIN + 1, i64::MAX - 1)]);
    }

    #[test]
    fn void_documents_are_recognised_by_a_reason_in_their_void_field() {
        assert!(is_void(
            &doc! { "n": 1, "voided": { "reason": "jam" } },
            "voided"
        ));
        assert!(is_void(
            &doc! { "n": 1, "x": { "v": { "reason": "jam" } } },
            "x.v"
        ));
        assert!(!is_void(&doc! { "n": 1, "voided": false }, "voided"));
        assert!(!is_void(&doc! { "n": 1, "voided": { "at": 1 } }, "voided"));
        assert!(!is_void(&doc! { "n": 1 }, "voided"));
        let mut a = run(&[1, 2, 3], Some(1));
        a.add_void(2);
        assert!(a.is_clean());
        assert_eq!((a.voided, a.voids.clone()), (1, vec![2]));
    }
}
