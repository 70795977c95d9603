//! The record format (its field names), what a record is about — its kind and exact subject
//! — and which records a read returns: exactly the subjects it asks for, by equality on
//! indexed fields, never by a prefix of a name. No I/O.
//!
//! A record names its subject in `kind` and `name`, plus the fields of its kind:
//!
//! | subject | `kind` | `name` | more |
//! |---|---|---|---|
//! | a sequence (plain, a template, or a striped sequence as a whole) | `sequence` | its name | |
//! | stripe *i* of the striped sequence `ids` | `stripe` | `ids` | `stripe`: *i* |
//! | scope `k` of template `t` | `scope` | `t@k` | `template`: `t`, `key`: `k` |
//! | a gap-free sequence | `gapless` | its name | |
//! | a queue | `queue` | its name | |
//!
//! Records written before kinds were recorded have kind `sequence` for every sequence, stripe,
//! scope and gap-free sequence (a stripe named `ids~3`). They are read by their exact name as
//! [`name_parts`] reads it — `ids~3` with stripe 3 of `ids`, `t@k` with scope `k` of `t` —
//! and those of a gap-free sequence by their operation (`void`, `release`, `max-lease`, and a
//! `create` whose parameters say `gapless: true`, which no other subject records).

use bson::{Bson, Document, doc};

use crate::spec::{NameParts, name_parts, stripe_name};

/// The fields of a history record (the collection's contract, for readers in any language).
pub(crate) mod field {
    pub const ID: &str = "_id";
    /// `"intent"` (written before the change) or `"outcome"` (after it).
    pub const PHASE: &str = "phase";
    /// `"sequence"`, `"stripe"`, `"scope"`, `"gapless"` or `"queue"` (see `subject.rs`).
    pub const KIND: &str = "kind";
    /// The subject's name (a stripe's: its striped sequence's; a scope's: `t@k`).
    pub const NAME: &str = "name";
    /// A stripe's index.
    pub const STRIPE: &str = "stripe";
    /// A scope's template and key.
    pub const TEMPLATE: &str = "template";
    pub const KEY: &str = "key";
    pub const OP: &str = "op";
    pub const PARAMS: &str = "params";
    pub const WHO: &str = "who";
    /// The server's clock (its `hello` reply's `localTime`).
    pub const AT: &str = "at";
    /// Present and `"client"` when the server did not say its time and this process's
    /// clock was used instead.
    pub const CLOCK: &str = "clock";
    pub const BEFORE: &str = "before";
    pub const AFTER: &str = "after";
    /// In an outcome: the `_id` of its intent.
    pub const OF: &str = "of";
    /// In an outcome: `"done"`, `"refused"` or `"failed"`.
    pub const OUTCOME: &str = "outcome";
    /// In an outcome that is not `"done"`: the error, as the library words it.
    pub const ERROR: &str = "error";

    pub const INTENT: &str = "intent";
    pub const OUTCOME_PHASE: &str = "outcome";
}

/// What a history record is about: its kind of subject. A record names its exact subject (a
/// stripe its striped sequence and index, a scope its template and key), and a read returns
/// the records of exactly the subjects it asks for (see [`Dispenser::history`](crate::Dispenser::history)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Subject {
    /// A sequence of the dispenser's collection: a plain one, a template, or a striped
    /// sequence as a whole (its creation). As a query's subject: the history of a sequence
    /// name, which the name says is a plain or striped sequence, a stripe or a scope.
    #[default]
    Sequence,
    /// A stripe of a striped sequence (`ids~3`: stripe 3 of `ids`).
    Stripe,
    /// A scope of a template (`t@k`: scope `k` of `t`).
    Scope,
    /// A gap-free sequence (`<collection>_gapless`).
    Gapless,
    /// A queue (`<collection>_queues`).
    Queue,
}

impl Subject {
    /// As records store it: `"sequence"`, `"stripe"`, `"scope"`, `"gapless"` or `"queue"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Subject::Sequence => "sequence",
            Subject::Stripe => "stripe",
            Subject::Scope => "scope",
            Subject::Gapless => "gapless",
            Subject::Queue => "queue",
        }
    }
}

/// The operations only a gap-free sequence records: what tells its records written before
/// kinds apart from a sequence's (with a `create` whose parameters say `gapless: true`).
const GAPLESS_OPS: [&str; 3] = ["void", "release", "max-lease"];

/// The exact subject of a record, as it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    kind: Subject,
    /// As stored: a stripe's striped sequence, a scope's full name `t@k`.
    name: String,
    stripe: Option<u32>,
    scope: Option<(String, String)>,
}

impl Target {
    /// The sequence document `name` — a plain sequence, a stripe `ids~3` or a scope `t@k`,
    /// as its name says ([`name_parts`]).
    pub(crate) fn sequence(name: &str) -> Target {
        match name_parts(name) {
            NameParts::Plain(n) => Target::plain(Subject::Sequence, n),
            NameParts::Stripe(base, i) => Target {
                kind: Subject::Stripe,
                name: base.to_owned(),
                stripe: Some(i),
                scope: None,
            },
            NameParts::Scope(template, key) => Target {
                kind: Subject::Scope,
                name: name.to_owned(),
                stripe: None,
                scope: Some((template.to_owned(), key.to_owned())),
            },
        }
    }

    /// The gap-free sequence `name`.
    pub(crate) fn gapless(name: &str) -> Target {
        Target::plain(Subject::Gapless, name)
    }

    /// The queue `name`.
    pub(crate) fn queue(name: &str) -> Target {
        Target::plain(Subject::Queue, name)
    }

    fn plain(kind: Subject, name: &str) -> Target {
        Target {
            kind,
            name: name.to_owned(),
            stripe: None,
            scope: None,
        }
    }

    /// The record's fields that name the subject.
    pub(crate) fn fields(&self) -> Document {
        let mut d = doc! { field::KIND: self.kind.as_str(), field::NAME: &self.name };
        if let Some(i) = self.stripe {
            d.insert(field::STRIPE, i64::from(i));
        }
        if let Some((template, key)) = &self.scope {
            d.insert(field::TEMPLATE, template);
            d.insert(field::KEY, key);
        }
        d
    }

    /// The subject as messages name it: `sequence "ids~3"` for a stripe (its document).
    pub(crate) fn shown(&self) -> String {
        let noun = match self.kind {
            Subject::Queue => "queue",
            Subject::Gapless => "gap-free sequence",
            _ => "sequence",
        };
        let name = match self.stripe {
            Some(i) => stripe_name(&self.name, i),
            None => self.name.clone(),
        };
        format!("{noun} {name:?}")
    }
}

/// The records of a gap-free sequence written before kinds were recorded (kind `sequence`).
fn legacy_gapless() -> Document {
    doc! { field::KIND: Subject::Sequence.as_str(), "$or": [
        { field::OP: { "$in": GAPLESS_OPS.to_vec() } },
        { format!("{}.gapless", field::PARAMS): true },
    ] }
}

/// The part of a read's filter that picks its subjects: the history `subject` asks for
/// under `name` (a sequence's history: the name says whether a plain or striped sequence,
/// a stripe or a scope; [`Subject::Stripe`] and [`Subject::Scope`] read the same way).
///
/// - a sequence `ids`: its records and its stripes' (`kind` `sequence` or `stripe`, `name`
///   `ids`);
/// - a stripe `ids~3`: stripe 3 of `ids`'s records, and those written before kinds under
///   the name `ids~3`;
/// - a scope `t@k`: its records (`kind` `scope` or, before kinds, `sequence`, `name` `t@k`);
/// - a gap-free sequence or a queue: the records of its kind and name.
///
/// A sequence's read leaves out a gap-free sequence's records written before kinds.
pub(crate) fn read_filter(subject: Subject, name: &str) -> Document {
    let kinds = |k: &[Subject]| -> Vec<Bson> { k.iter().map(|s| Bson::from(s.as_str())).collect() };
    let not_gapless = || -> Vec<Bson> {
        let d = legacy_gapless();
        vec![Bson::Document(d)]
    };
    match subject {
        Subject::Queue => doc! { field::NAME: name, field::KIND: Subject::Queue.as_str() },
        Subject::Gapless => doc! { field::NAME: name, "$or": [
            { field::KIND: Subject::Gapless.as_str() },
            legacy_gapless(),
        ] },
        Subject::Sequence | Subject::Stripe | Subject::Scope => match name_parts(name) {
            NameParts::Stripe(base, i) => doc! {
                "$or": [
                    { field::NAME: base, field::KIND: Subject::Stripe.as_str(), field::STRIPE: i64::from(i) },
                    { field::NAME: name, field::KIND: Subject::Sequence.as_str() },
                ],
                "$nor": not_gapless(),
            },
            NameParts::Scope(..) => doc! {
                field::NAME: name,
                field::KIND: { "$in": kinds(&[Subject::Scope, Subject::Sequence]) },
                "$nor": not_gapless(),
            },
            NameParts::Plain(_) => doc! {
                field::NAME: name,
                field::KIND: { "$in": kinds(&[Subject::Sequence, Subject::Stripe]) },
                "$nor": not_gapless(),
            },
        },
    }
}

/// The subject of the intent record `d` as an entry shows it: its kind, its name (a
/// stripe's document name `ids~3`), its stripe, and its scope's template and key. `None`
/// for a kind this version does not know.
pub(crate) fn decode(d: &Document) -> Option<Decoded> {
    let name = d.get_str(field::NAME).ok()?.to_owned();
    let kind = d.get_str(field::KIND).ok()?;
    let stripe_of = |d: &Document| -> Option<u32> {
        match d.get(field::STRIPE)? {
            Bson::Int64(i) => u32::try_from(*i).ok(),
            Bson::Int32(i) => u32::try_from(*i).ok(),
            _ => None,
        }
    };
    Some(match kind {
        "queue" => Decoded::plain(Subject::Queue, name),
        "gapless" => Decoded::plain(Subject::Gapless, name),
        "stripe" => {
            let i = stripe_of(d)?;
            Decoded {
                subject: Subject::Stripe,
                name: stripe_name(&name, i),
                stripe: Some(i),
                scope: None,
            }
        }
        "scope" => {
            let template = d.get_str(field::TEMPLATE).ok()?.to_owned();
            let key = d.get_str(field::KEY).ok()?.to_owned();
            Decoded {
                subject: Subject::Scope,
                name,
                stripe: None,
                scope: Some((template, key)),
            }
        }
        // A sequence's, or any sequence-like subject's from before kinds were recorded.
        "sequence" => {
            let op = d.get_str(field::OP).unwrap_or_default();
            let gapless = GAPLESS_OPS.contains(&op)
                || d.get_document(field::PARAMS)
                    .is_ok_and(|p| p.get_bool("gapless") == Ok(true));
            if gapless {
                Decoded::plain(Subject::Gapless, name)
            } else {
                match name_parts(&name) {
                    NameParts::Plain(_) => Decoded::plain(Subject::Sequence, name),
                    NameParts::Stripe(_, i) => Decoded {
                        subject: Subject::Stripe,
                        stripe: Some(i),
                        scope: None,
                        name,
                    },
                    NameParts::Scope(template, key) => Decoded {
                        subject: Subject::Scope,
                        stripe: None,
                        scope: Some((template.to_owned(), key.to_owned())),
                        name,
                    },
                }
            }
        }
        _ => return None,
    })
}

/// A record's subject as an entry shows it (see [`decode`]).
pub(crate) struct Decoded {
    pub(crate) subject: Subject,
    pub(crate) name: String,
    pub(crate) stripe: Option<u32>,
    pub(crate) scope: Option<(String, String)>,
}

impl Decoded {
    fn plain(subject: Subject, name: String) -> Decoded {
        Decoded {
            subject,
            name,
            stripe: None,
            scope: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the record `d` matches `filter`, for the operators these filters use
    /// (equality, `$in`, `$or`, `$nor`, dotted paths one level deep).
    fn matches(filter: &Document, d: &Document) -> bool {
        filter.iter().all(|(k, v)| match k.as_str() {
            "$or" => v.as_array().is_some_and(|a| {
                a.iter()
                    .any(|f| f.as_document().is_some_and(|f| matches(f, d)))
            }),
            "$nor" => v.as_array().is_some_and(|a| {
                !a.iter()
                    .any(|f| f.as_document().is_some_and(|f| matches(f, d)))
            }),
            path => {
                let got = match path.split_once('.') {
                    Some((a, b)) => d.get_document(a).ok().and_then(|x| x.get(b)),
                    None => d.get(path),
                };
                match v.as_document().and_then(|o| o.get_array("$in").ok()) {
                    Some(any) => got.is_some_and(|g| any.contains(g)),
                    None => got == Some(v),
                }
            }
        })
    }

    fn record(target: &Target, op: &str) -> Document {
        let mut d = target.fields();
        d.insert(field::OP, op);
        d.insert(field::PARAMS, Document::new());
        d
    }

    fn legacy(name: &str, op: &str, params: Document) -> Document {
        doc! { field::KIND: "sequence", field::NAME: name, field::OP: op, field::PARAMS: params }
    }

    /// Each read returns exactly its subjects' records, whatever the names share: a
    /// gap-free `ids~1` or `pub~hidden`, a scope `pub@a~secret` or a queue `pub` are never
    /// in `pub`'s, `ids`'s or `pub@a`'s history, and records from before kinds are read by
    /// their exact name.
    #[test]
    fn a_read_returns_exactly_its_subjects() {
        let world: Vec<(&str, Document)> = vec![
            ("seq pub", record(&Target::sequence("pub"), "reset")),
            ("seq ids", record(&Target::sequence("ids"), "create")),
            ("stripe ids 0", record(&Target::sequence("ids~0"), "reset")),
            ("stripe ids 1", record(&Target::sequence("ids~1"), "reset")),
            (
                "stripe idsx 1",
                record(&Target::sequence("idsx~1"), "reset"),
            ),
            ("scope pub@a", record(&Target::sequence("pub@a"), "create")),
            (
                "scope pub@a~secret",
                record(&Target::sequence("pub@a~secret"), "reset"),
            ),
            (
                "scope pub@a@b",
                record(&Target::sequence("pub@a@b"), "reset"),
            ),
            (
                "gapless pub~hidden",
                record(&Target::gapless("pub~hidden"), "void"),
            ),
            ("gapless ids~1", record(&Target::gapless("ids~1"), "create")),
            ("gapless pub", record(&Target::gapless("pub"), "max-lease")),
            ("queue pub", record(&Target::queue("pub"), "create")),
            ("queue pub~q", record(&Target::queue("pub~q"), "create")),
            ("legacy seq pub", legacy("pub", "alter", Document::new())),
            (
                "legacy stripe ids 1",
                legacy("ids~1", "reset", Document::new()),
            ),
            (
                "legacy scope pub@a~secret",
                legacy("pub@a~secret", "reset", Document::new()),
            ),
            (
                "legacy gapless pub",
                legacy("pub", "create", doc! { "gapless": true }),
            ),
            (
                "legacy gapless pub void",
                legacy("pub", "void", Document::new()),
            ),
            (
                "legacy gapless ids~1",
                legacy("ids~1", "release", Document::new()),
            ),
            (
                "legacy gapless pub~hidden",
                legacy("pub~hidden", "void", Document::new()),
            ),
        ];
        let read = |subject: Subject, name: &str| -> Vec<&str> {
            let f = read_filter(subject, name);
            world
                .iter()
                .filter(|(_, d)| matches(&f, d))
                .map(|(what, _)| *what)
                .collect()
        };
        assert_eq!(
            read(Subject::Sequence, "pub"),
            ["seq pub", "legacy seq pub"]
        );
        assert_eq!(
            read(Subject::Sequence, "ids"),
            ["seq ids", "stripe ids 0", "stripe ids 1"]
        );
        assert_eq!(
            read(Subject::Sequence, "ids~1"),
            ["stripe ids 1", "legacy stripe ids 1"]
        );
        assert_eq!(
            read(Subject::Stripe, "ids~1"),
            read(Subject::Sequence, "ids~1")
        );
        assert_eq!(read(Subject::Sequence, "pub@a"), ["scope pub@a"]);
        assert_eq!(
            read(Subject::Sequence, "pub@a~secret"),
            ["scope pub@a~secret", "legacy scope pub@a~secret"]
        );
        assert_eq!(read(Subject::Sequence, "pub~hidden"), Vec::<&str>::new());
        assert_eq!(
            read(Subject::Gapless, "pub~hidden"),
            ["gapless pub~hidden", "legacy gapless pub~hidden"]
        );
        assert_eq!(
            read(Subject::Gapless, "ids~1"),
            ["gapless ids~1", "legacy gapless ids~1"]
        );
        assert_eq!(
            read(Subject::Gapless, "pub"),
            [
                "gapless pub",
                "legacy gapless pub",
                "legacy gapless pub void"
            ]
        );
        assert_eq!(read(Subject::Queue, "pub"), ["queue pub"]);
        assert_eq!(read(Subject::Queue, "pub~q"), ["queue pub~q"]);
        assert_eq!(read(Subject::Sequence, "pu"), Vec::<&str>::new());
    }

    /// An entry shows the subject a record names, old or new.
    #[test]
    fn records_decode_to_their_subject() {
        let shown = |d: &Document| {
            let x = decode(d).unwrap();
            (x.subject, x.name, x.stripe, x.scope)
        };
        let scope = Some(("pub".to_owned(), "a~secret".to_owned()));
        for (d, want) in [
            (
                record(&Target::sequence("ids~3"), "reset"),
                (Subject::Stripe, "ids~3".to_owned(), Some(3), None),
            ),
            (
                legacy("ids~3", "reset", Document::new()),
                (Subject::Stripe, "ids~3".to_owned(), Some(3), None),
            ),
            (
                record(&Target::sequence("pub@a~secret"), "reset"),
                (
                    Subject::Scope,
                    "pub@a~secret".to_owned(),
                    None,
                    scope.clone(),
                ),
            ),
            (
                legacy("pub@a~secret", "reset", Document::new()),
                (Subject::Scope, "pub@a~secret".to_owned(), None, scope),
            ),
            (
                legacy("pub~hidden", "void", Document::new()),
                (Subject::Gapless, "pub~hidden".to_owned(), None, None),
            ),
            (
                record(&Target::gapless("pub~hidden"), "create"),
                (Subject::Gapless, "pub~hidden".to_owned(), None, None),
            ),
            (
                record(&Target::queue("pub@a"), "create"),
                (Subject::Queue, "pub@a".to_owned(), None, None),
            ),
        ] {
            assert_eq!(shown(&d), want, "{d}");
        }
        assert!(decode(&doc! { "kind": "ledger", "name": "x" }).is_none());
        assert!(decode(&doc! { "kind": "stripe", "name": "x" }).is_none());
        assert_eq!(
            Target::sequence("ids~3").shown(),
            "sequence \"ids~3\"".to_owned()
        );
    }
}
