//! `dispenser adopt`: moves a sequence past what another numbering issued (the switch-over from
//! mongoose-sequence, mongoengine, a counter written by hand, or documents already numbered).

use std::io::Write;

use dispenser::Dispenser;
use dispenser::mongodb::bson::Document;
use dispenser::sequence::{AdoptSource, Adopted};

use crate::exit::Outcome;
use crate::output::{io_err, one_line_name};

/// Where the numbers were issued before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum From {
    /// mongoose-sequence's counter of --id (collection `counters`, `{id, reference_value,
    /// seq}`); with --scoped, each of its scoped counters into the scope of NAME (a template)
    /// whose key is its reference values.
    MongooseSequence,
    /// mongoengine's SequenceField counter --id ("<sequence_name>.<field>"; collection
    /// `mongoengine.counters`).
    Mongoengine,
    /// The document --filter matches in --source-collection holds the last number issued in --field.
    Counter,
    /// The highest number the documents of --source-collection carry in --field (for a sequence
    /// counting down, the lowest).
    Highest,
}

/// `dispenser adopt`.
#[derive(Debug, clap::Args)]
pub struct AdoptArgs {
    /// The sequence (with --scoped, the template whose scopes are made).
    pub name: String,
    /// What kind of numbering the numbers come from.
    #[arg(long, value_enum)]
    pub from: From,
    /// The counter's id (mongoose-sequence's `id` option, the field name by default; for
    /// mongoengine, "<sequence_name>.<field>").
    #[arg(long, required_if_eq_any = [("from", "mongoose-sequence"), ("from", "mongoengine")])]
    pub id: Option<String>,
    /// mongoose-sequence's counters kept per `reference_fields`: each into a scope of NAME.
    #[arg(long)]
    pub scoped: bool,
    /// The collection holding the source (the counters' collection of mongoose-sequence or
    /// mongoengine when they were told another; the documents for --from highest).
    #[arg(long, value_name = "COLLECTION", required_if_eq_any = [("from", "counter"), ("from", "highest")])]
    pub source_collection: Option<String>,
    /// The database holding the source [default: --db].
    #[arg(long, value_name = "DB")]
    pub source_db: Option<String>,
    /// With --from counter: the JSON filter matching the one counter document.
    #[arg(long, required_if_eq("from", "counter"))]
    pub filter: Option<String>,
    /// With --from counter or highest: the field holding the number.
    #[arg(long, required_if_eq_any = [("from", "counter"), ("from", "highest")])]
    pub field: Option<String>,
    /// Print what was done as JSON: one array of `{name, highest, moved, state}`.
    #[arg(long)]
    pub json: bool,
}

/// The source the arguments name (bad input: a clear error, nothing read).
fn source(a: &AdoptArgs) -> dispenser::Result<AdoptSource> {
    let bad = |what: &str, reason: String| dispenser::Error::InvalidArgument {
        what: what.to_owned(),
        reason,
    };
    let id = || a.id.clone().unwrap_or_default();
    let mut s = match a.from {
        From::MongooseSequence if a.scoped => AdoptSource::mongoose_sequence_scoped(id()),
        From::MongooseSequence => AdoptSource::mongoose_sequence(id()),
        From::Mongoengine => AdoptSource::mongoengine(id()),
        From::Counter => {
            let text = a.filter.as_deref().unwrap_or("{}");
            let json: serde_json::Value = serde_json::from_str(text)
                .map_err(|e| bad("--filter", format!("{text:?} is not JSON: {e}")))?;
            let filter: Document = dispenser::mongodb::bson::to_document(&json).map_err(|_| {
                bad(
                    "--filter",
                    format!(
                        "{text:?} is not a JSON object (a filter such as '{{\"_id\": \"orders\"}}')"
                    ),
                )
            })?;
            AdoptSource::counter(
                a.source_collection.clone().unwrap_or_default(),
                filter,
                a.field.clone().unwrap_or_default(),
            )
        }
        From::Highest => AdoptSource::highest(
            a.source_collection.clone().unwrap_or_default(),
            a.field.clone().unwrap_or_default(),
        ),
    };
    if a.scoped && a.from != From::MongooseSequence {
        return Err(bad(
            "--scoped",
            "only mongoose-sequence keeps scoped counters (--from mongoose-sequence)".to_owned(),
        ));
    }
    if let (Some(c), From::MongooseSequence | From::Mongoengine) = (&a.source_collection, a.from) {
        s = s.in_collection(c.clone());
    }
    if let Some(db) = &a.source_db {
        s = s.in_database(db.clone());
    }
    Ok(s)
}

/// One line per sequence adopted into.
fn line(a: &Adopted) -> String {
    let next = a.state.value.saturating_add(a.state.step);
    let name = one_line_name(&a.name);
    match (a.highest, a.moved) {
        (None, _) => format!("{name}: the source holds no number; next {next}, nothing written"),
        (Some(h), true) => format!("{name}: adopted up to {h}; next {next}"),
        (Some(h), false) => {
            format!("{name}: already past {h}; next {next}, nothing written")
        }
    }
}

pub async fn run(d: &Dispenser, a: AdoptArgs, out: &mut impl Write) -> dispenser::Result<Outcome> {
    let s = source(&a)?;
    let done = d.adopt(&a.name, s).await?;
    if done.iter().any(|x| x.moved) {
        crate::output::wrote(format!("sequence {:?} moved past its source", a.name));
    }
    if a.json {
        let items: Vec<serde_json::Value> = done
            .iter()
            .map(|x| {
                serde_json::json!({
                    "name": x.name, "highest": x.highest, "moved": x.moved, "state": x.state.to_json(),
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::Value::Array(items)).map_err(io_err)?;
    } else {
        if done.is_empty() {
            writeln!(
                out,
                "{}: the source holds no scoped counter; nothing written",
                one_line_name(&a.name)
            )
            .map_err(io_err)?;
        }
        for x in &done {
            writeln!(out, "{}", line(x)).map_err(io_err)?;
        }
    }
    Ok(Outcome::Done)
}
