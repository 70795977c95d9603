//! The listing builders' common part: which names a page holds (after a cursor, matching
//! patterns, among given names, within a scope range) and how many, as one `_id` filter that
//! the server answers from its index. [`Dispenser::list`] (sequences and, with
//! [`ListSequences::scopes_of`], the scopes of a template),
//! [`Dispenser::list_queues`](crate::Dispenser::list_queues) and
//! [`Dispenser::list_gapless`](crate::Dispenser::list_gapless) each return a builder on it.

use std::future::IntoFuture;

use bson::{Document, doc};

use crate::action::Action;
use crate::dispenser::Dispenser;
use crate::document::{SequenceState, field};
use crate::error::{Error, Result};
use crate::spec::validate_name;

/// The setters every listing builder has (on its `page` field): `.matching`, `.after`,
/// `.limit`, `.named`; `$things` names what it lists in their docs.
macro_rules! page_setters {
    ($things:literal) => {
        #[doc = concat!("Only the ", $things, " whose names match one of `patterns` (`*` any run of")]
        /// characters, `?` one character, everything else itself; `"*"` every name): the
        /// server returns only the matching names, read from the index, so a page is full
        /// whenever enough of them exist and no other document is read. This is how the
        /// service lists for a token: what the token may not see is never read, and the next
        /// page's cursor is always a name the token may see.
        pub fn matching<I, S>(mut self, patterns: I) -> Self
        where
            I: IntoIterator<Item = S>,
            S: Into<String>,
        {
            self.page.matching(patterns);
            self
        }

        /// Only the names that sort after `cursor` (byte order): the next page after a page
        /// whose last name is `cursor`.
        pub fn after(mut self, cursor: impl Into<String>) -> Self {
            self.page.after(cursor);
            self
        }

        #[doc = concat!("At most `limit` ", $things, " (at least 1). Defaults to every one.")]
        pub fn limit(mut self, limit: usize) -> Self {
            self.page.limit(limit);
            self
        }

        #[doc = concat!("Only the ", $things, " among `names` that exist: a name without a document")]
        /// is simply not in the answer (so a caller can tell which are gone).
        pub fn named<I, S>(mut self, names: I) -> Self
        where
            I: IntoIterator<Item = S>,
            S: Into<String>,
        {
            self.page.named(names);
            self
        }
    };
}
pub(crate) use page_setters;

/// The names and the size of one page of a listing.
#[derive(Clone, Debug, Default)]
pub(crate) struct Page {
    patterns: Option<Vec<String>>,
    after: Option<String>,
    limit: Option<usize>,
    named: Option<Vec<String>>,
    range: Option<(String, String)>,
}

impl Page {
    pub(crate) fn matching<I, S>(&mut self, patterns: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.patterns = Some(patterns.into_iter().map(Into::into).collect());
    }

    pub(crate) fn after(&mut self, after: impl Into<String>) {
        self.after = Some(after.into());
    }

    pub(crate) fn limit(&mut self, limit: usize) {
        self.limit = Some(limit);
    }

    pub(crate) fn named<I, S>(&mut self, names: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.named = Some(names.into_iter().map(Into::into).collect());
    }

    pub(crate) fn range(&mut self, from: String, to: String) {
        self.range = Some((from, to));
    }

    /// Whether the page is empty whatever is stored: `named` with no name left.
    pub(crate) fn is_none(&self) -> bool {
        self.named.as_ref().is_some_and(Vec::is_empty)
    }

    /// Keeps of `named` only the names `valid` accepts (no document can have the others).
    pub(crate) fn keep_named(&mut self, valid: impl Fn(&str) -> bool) {
        if let Some(n) = &mut self.named {
            n.retain(|s| valid(s));
        }
    }

    /// The limit for the driver: `None` for every document, refused when 0 (`what` names the
    /// listing, `things` what it lists).
    pub(crate) fn find_limit(&self, what: &str, things: &str) -> Result<Option<i64>> {
        match self.limit {
            Some(0) => Err(Error::invalid_argument(
                what,
                format!("a page of 0 {things} was asked for; ask for at least 1"),
            )),
            Some(n) => Ok(Some(i64::try_from(n).unwrap_or(i64::MAX))),
            None => Ok(None),
        }
    }

    /// The `_id` filter of the page: each condition given (after the cursor, matching the
    /// patterns, among the names, within the range), joined with `$and`; with none, every
    /// string `_id`. A listing by names is their `$in` alone (with any other condition): the
    /// server looks each name up in the `_id` index, instead of walking the index from the
    /// first name (`$gte: ""` beside an `$in` made a scrape of 200 names among 100 000
    /// sequences read them all: 1.8 s instead of 10 ms).
    pub(crate) fn filter(&self) -> Document {
        let patterns: Option<Vec<&str>> = self
            .patterns
            .as_ref()
            .map(|p| p.iter().map(String::as_str).collect());
        let regex = patterns.as_deref().and_then(crate::spec::names_regex);
        let mut and = Vec::new();
        if self.after.is_some() || regex.is_some() || self.named.is_none() {
            and.push(crate::store::page_filter(
                self.after.as_deref(),
                regex.as_deref(),
            ));
        }
        if let Some(names) = &self.named {
            and.push(doc! { field::ID: { "$in": names } });
        }
        if let Some((from, to)) = &self.range {
            and.push(doc! { field::ID: { "$gte": from, "$lt": to } });
        }
        match and.len() {
            1 => and.remove(0),
            _ => doc! { "$and": and },
        }
    }
}

/// A listing of sequences ([`Dispenser::list`]): every sequence by name, unless narrowed.
/// `.await` it for their states, by name; a document that does not decode is an
/// [`Error::CorruptDocument`] in its place, so one bad document does not hide the others.
///
/// A page: `.limit(n)` sequences at most, `.after(cursor)` the names sorting after `cursor`
/// (byte order). The next page starts after the last name of this one (a corrupt document's
/// name is in its [`Error::CorruptDocument`]); a page shorter than the limit is the last. One
/// query, whatever the size of the collection.
///
/// # Errors
///
/// [`Error::InvalidArgument`] when the limit is 0; [`Error::InvalidName`] when the template of
/// [`ListSequences::scopes_of`] is not a valid name; [`Error::Database`] or
/// [`Error::Timeout`] when the collection cannot be read.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let mut after: Option<String> = None;
/// loop {
///     let mut list = d.list().matching(["invoices-*"]).limit(1000);
///     if let Some(a) = &after {
///         list = list.after(a.as_str());
///     }
///     let page = list.await?;
///     for s in page.iter().flatten() {
///         println!("{}: next {:?}", s.name, s.next_number());
///     }
///     if page.len() < 1000 {
///         break;
///     }
///     after = page.last().map(|s| match s {
///         Ok(s) => s.name.clone(),
///         Err(dispenser::Error::CorruptDocument { name, .. }) => name.clone(),
///         Err(_) => String::new(),
///     });
/// }
/// let two = d.list().named(["orders", "invoices"]).await?; // those that exist
/// let days = d.list().scopes_of("tickets").await?; // tickets@2026-01-01, …
/// # Ok(()) }
/// ```
#[must_use = "a listing does nothing until it is awaited"]
#[derive(Debug)]
pub struct ListSequences<'a> {
    dispenser: &'a Dispenser,
    page: Page,
    scopes_of: Option<String>,
}

impl<'a> ListSequences<'a> {
    pub(crate) fn new(dispenser: &'a Dispenser) -> Self {
        ListSequences {
            dispenser,
            page: Page::default(),
            scopes_of: None,
        }
    }

    page_setters!("sequences");

    /// Only the scopes of `template` (see [`scope`](crate::scope)), sorted by scope key:
    /// `template@key` for every key, not the template itself.
    pub fn scopes_of(mut self, template: impl Into<String>) -> Self {
        self.scopes_of = Some(template.into());
        self
    }
}

impl<'a> IntoFuture for ListSequences<'a> {
    type Output = Result<Vec<Result<SequenceState>>>;
    type IntoFuture = Action<'a, Vec<Result<SequenceState>>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let mut page = self.page;
            if let Some(template) = &self.scopes_of {
                let (from, to) = crate::scope::scope_range(template)?;
                page.range(from, to);
            }
            let limit = page.find_limit("limit", "sequences")?;
            page.keep_named(|n| validate_name(n).is_ok());
            if page.is_none() {
                return Ok(Vec::new());
            }
            self.dispenser.store().list_page(page.filter(), limit).await
        })
    }
}

impl Dispenser {
    /// Lists the sequences: every one by name, or a page of them — see [`ListSequences`]
    /// for its options (`.matching(patterns)`, `.after(cursor)`, `.limit(n)`,
    /// `.named(names)`, `.scopes_of(template)`). A document that does not decode is an
    /// [`Error::CorruptDocument`] in its place, so one bad document does not hide the rest.
    ///
    /// # Errors
    ///
    /// See [`ListSequences`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// for s in d.list().matching(["invoices-*"]).limit(100).await?.iter().flatten() {
    ///     println!("{}: next {:?}", s.name, s.next_number());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn list(&self) -> ListSequences<'_> {
        ListSequences::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 63): a listing by names carried `$gte: ""` beside its `$in`, and a
    /// server walked the whole `_id` index for it (a scrape of 200 names among 100 000
    /// sequences: 1.8 s). By names, the filter is the `$in` alone; the other conditions join it.
    #[test]
    fn a_listing_by_names_is_their_in_alone() {
        let mut p = Page::default();
        assert_eq!(p.filter(), doc! { "_id": { "$gte": "" } });
        p.named(["b", "a"]);
        assert_eq!(p.filter(), doc! { "_id": { "$in": ["b", "a"] } });
        p.after("a");
        assert_eq!(
            p.filter(),
            doc! { "$and": [ { "_id": { "$gt": "a" } }, { "_id": { "$in": ["b", "a"] } } ] }
        );
        let mut q = Page::default();
        q.named(["x"]);
        q.range("t@".into(), "t@\u{10ffff}".into());
        assert_eq!(
            q.filter(),
            doc! { "$and": [ { "_id": { "$in": ["x"] } }, { "_id": { "$gte": "t@", "$lt": "t@\u{10ffff}" } } ] }
        );
    }
}
