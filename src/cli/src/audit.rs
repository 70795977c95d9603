//! `dispenser audit COLLECTION --field F`: gaps, duplicates and voids of a number field.

use std::io::Write;

use dispenser::Dispenser;
use dispenser::gapless::{Audit, AuditOptions, audit};
use dispenser::mongodb::bson::Document;
use serde_json::json;

use crate::exit::Outcome;
use crate::output::io_err;

/// `dispenser audit`.
#[derive(clap::Args, Debug)]
pub struct AuditArgs {
    /// The collection to audit (in --db).
    #[arg(value_name = "COLLECTION")]
    pub audited: String,
    /// The integer field holding the numbers (a dotted path for a nested field).
    #[arg(long)]
    pub field: String,
    /// The first number expected (default: the smallest found); numbers below are ignored.
    #[arg(long, allow_negative_numbers = true)]
    pub from: Option<i64>,
    /// The field marking void documents (a gap-free sequence's `void_field`): a document
    /// whose value there holds a `reason` is counted as voided, not missing.
    #[arg(long, default_value = "voided")]
    pub void_field: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn ranges(gaps: &[(i64, i64)]) -> String {
    gaps.iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Prints the audit; the exit code is 0 when clean, 1 when gaps, duplicates or numbers of
/// another type or shape were found.
pub async fn run(
    d: &Dispenser,
    args: AuditArgs,
    out: &mut impl Write,
) -> dispenser::Result<Outcome> {
    let mut options = AuditOptions::default()
        .with_void_field(&args.void_field)
        .with_timeout(d.options().operation_timeout);
    options.from = args.from;
    let business = d
        .client()
        .database(&d.options().database)
        .collection::<Document>(&args.audited);
    let a: Audit = audit(&business, &args.field, &options).await?;
    let io = |e: std::io::Error| dispenser::Error::InvalidArgument {
        what: "output".into(),
        reason: e.to_string(),
    };
    if args.json {
        let v = json!({
            "collection": args.audited, "field": args.field, "from": args.from,
            "numbers": a.numbers, "first": a.first, "last": a.last,
            "missing": a.missing, "gaps": a.gaps.iter().map(|(x, y)| json!([x, y])).collect::<Vec<_>>(),
            "duplicated": a.duplicated,
            "duplicates": a.duplicates.iter().map(|(n, c)| json!({"number": n, "count": c})).collect::<Vec<_>>(),
            "not_integer": a.not_integer, "voided": a.voided, "voids": a.voids,
            "malformed": a.malformed,
            "malformed_docs": a.malformed_docs.iter().map(|(id, p)| json!({"_id": id, "problem": p})).collect::<Vec<_>>(),
            "void_field": args.void_field, "clean": a.is_clean(),
        });
        writeln!(out, "{v}").map_err(io)?;
    } else {
        let span = match (a.first, a.last) {
            (Some(f), Some(l)) => format!("{} to {l}", args.from.unwrap_or(f)),
            _ => "no numbers".to_owned(),
        };
        let verdict = if a.is_clean() { "OK" } else { "PROBLEMS" };
        writeln!(
            out,
            "{verdict} {}.{}: {} number(s), {span}; {} missing, {} duplicated{}{}{}",
            args.audited,
            args.field,
            a.numbers,
            a.missing,
            a.duplicated,
            if a.voided > 0 {
                format!("; {} voided", a.voided)
            } else {
                String::new()
            },
            if a.not_integer > 0 {
                format!(
                    "; {} document(s) with a non-integer value ignored",
                    a.not_integer
                )
            } else {
                String::new()
            },
            if a.malformed > 0 {
                format!(
                    "; {} document(s) with a number of another type or shape (Decimal128, array)",
                    a.malformed
                )
            } else {
                String::new()
            }
        )
        .map_err(io)?;
        if !a.gaps.is_empty() {
            writeln!(out, "missing: {}", ranges(&a.gaps)).map_err(io)?;
        }
        if !a.voids.is_empty() {
            let list: Vec<String> = a.voids.iter().map(i64::to_string).collect();
            writeln!(out, "voided: {}", list.join(", ")).map_err(io)?;
        }
        for (id, problem) in &a.malformed_docs {
            writeln!(out, "malformed: _id {id}: {} {problem}", args.field).map_err(io)?;
        }
        if !a.duplicates.is_empty() {
            let list: Vec<String> = a
                .duplicates
                .iter()
                .map(|(n, c)| format!("{n} ×{c}"))
                .collect();
            writeln!(out, "duplicated: {}", list.join(", ")).map_err(io)?;
        }
    }
    out.flush().map_err(io_err)?;
    Ok(Outcome::Exit(if a.is_clean() { 0 } else { 1 }))
}
