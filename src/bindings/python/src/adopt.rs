//! Values that are not handles: `AdoptSource` (where another numbering issued numbers, for
//! `adopt`) and `Format` (a serial format, rendered without I/O).

use pyo3::prelude::*;

use dispenser::Format;
use dispenser::sequence::{AdoptKind, AdoptSource};

use crate::convert::document;
use crate::errors::to_py_err;

/// Where numbers were issued before, for `Dispenser.adopt` / `Sequence.adopt`: a counter
/// document's field (the last number it issued) — mongoengine's, mongoose-sequence's, one of
/// one's own — or the highest number a collection's field holds. In the dispenser's
/// database unless `in_database` names another. Made by its static methods; immutable
/// (`in_database` and `in_collection` return a new one).
#[pyclass(frozen, eq, module = "dispenser", name = "AdoptSource")]
#[derive(Clone, PartialEq)]
pub(crate) struct PyAdoptSource(pub(crate) AdoptSource);

#[pymethods]
impl PyAdoptSource {
    /// mongoengine's `SequenceField` counter: collection `mongoengine.counters`, document
    /// `{_id: sequence_id, next: N}` (`next` is the last number issued; `sequence_id` is
    /// `"<sequence_name>.<field>"`, the sequence name defaulting to the collection's name).
    #[staticmethod]
    fn mongoengine(sequence_id: String) -> Self {
        PyAdoptSource(AdoptSource::mongoengine(sequence_id))
    }

    /// mongoose-sequence's unscoped counter of the id `id` (collection `counters`).
    #[staticmethod]
    fn mongoose_sequence(id: String) -> Self {
        PyAdoptSource(AdoptSource::mongoose_sequence(id))
    }

    /// mongoose-sequence's counters of the id `id` kept per reference fields: each into the
    /// scope of the template adopted into whose key is its reference values.
    #[staticmethod]
    fn mongoose_sequence_scoped(id: String) -> Self {
        PyAdoptSource(AdoptSource::mongoose_sequence_scoped(id))
    }

    /// The document `filter` (a dict) matches in `collection` holds the last number issued
    /// in `field`.
    #[staticmethod]
    fn counter(
        py: Python<'_>,
        collection: String,
        filter: &Bound<'_, PyAny>,
        field: String,
    ) -> PyResult<Self> {
        let filter = document("adopt source filter", filter)?.map_err(|e| to_py_err(py, &e))?;
        Ok(PyAdoptSource(AdoptSource::counter(
            collection, filter, field,
        )))
    }

    /// The highest whole number the documents of `collection` carry in `field` (the lowest,
    /// for a sequence counting down).
    #[staticmethod]
    fn highest(collection: String, field: String) -> Self {
        PyAdoptSource(AdoptSource::highest(collection, field))
    }

    /// The same source in the database `database`.
    fn in_database(&self, database: String) -> Self {
        PyAdoptSource(self.0.clone().in_database(database))
    }

    /// The same source in the collection `collection`.
    fn in_collection(&self, collection: String) -> Self {
        PyAdoptSource(self.0.clone().in_collection(collection))
    }

    /// The database holding the source (`None`: the dispenser's).
    #[getter]
    fn database(&self) -> Option<String> {
        self.0.database.clone()
    }

    /// The collection holding the source.
    #[getter]
    fn collection(&self) -> String {
        self.0.collection.clone()
    }

    /// The field holding the number: a counter's, `"seq"` for mongoose-sequence's, the
    /// documents' for `highest`.
    #[getter]
    fn field(&self) -> String {
        match &self.0.kind {
            AdoptKind::Counter { field, .. } | AdoptKind::Highest { field } => field.clone(),
            _ => "seq".to_owned(),
        }
    }

    /// The filter that finds the counter document (`None` for `highest`; for a scoped
    /// mongoose-sequence source, that of the unscoped counter).
    #[getter]
    fn filter(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let filter = match &self.0.kind {
            AdoptKind::Counter { filter, .. } => {
                dispenser::mongodb::bson::Bson::Document(filter.clone()).into_relaxed_extjson()
            }
            AdoptKind::MongooseSequence { id, .. } => {
                serde_json::json!({ "id": id, "reference_value": null })
            }
            _ => serde_json::Value::Null,
        };
        Ok(crate::convert::Json(filter).into_pyobject(py)?.unbind())
    }

    /// Whether it adopts each scope of a template (a scoped mongoose-sequence source).
    #[getter]
    fn scoped(&self) -> bool {
        matches!(
            self.0.kind,
            AdoptKind::MongooseSequence { scoped: true, .. }
        )
    }

    /// `"counter"`, `"mongoose-sequence"` or `"highest"`.
    #[getter]
    fn kind(&self) -> &'static str {
        match &self.0.kind {
            AdoptKind::Counter { .. } => "counter",
            AdoptKind::MongooseSequence { .. } => "mongoose-sequence",
            AdoptKind::Highest { .. } => "highest",
            _ => "other",
        }
    }

    fn __repr__(&self) -> String {
        let place = match &self.0.database {
            Some(db) => format!(".in_database({db:?})"),
            None => String::new(),
        };
        let what = match &self.0.kind {
            AdoptKind::Counter { filter, field } => {
                format!("counter({:?}, {filter}, {field:?})", self.0.collection)
            }
            AdoptKind::MongooseSequence { id, scoped } => format!(
                "mongoose_sequence{}({id:?}).in_collection({:?})",
                if *scoped { "_scoped" } else { "" },
                self.0.collection
            ),
            AdoptKind::Highest { field } => {
                format!("highest({:?}, {field:?})", self.0.collection)
            }
            other => format!("{other:?}"),
        };
        format!("AdoptSource.{what}{place}")
    }
}

/// A serial format (`"INV-{n:06}"`, `"A-{scope}-{n}"`): what `create(format=…)` stores,
/// rendered here without I/O. A format that does not parse is refused
/// (`InvalidInputError`).
#[pyclass(frozen, eq, module = "dispenser", name = "Format")]
#[derive(Clone, PartialEq)]
pub(crate) struct PyFormat(Format);

#[pymethods]
impl PyFormat {
    #[new]
    fn new(py: Python<'_>, source: &str) -> PyResult<Self> {
        Format::parse(source)
            .map(PyFormat)
            .map_err(|e| to_py_err(py, &e))
    }

    /// `n` rendered (`{scope}` filled by `scope`; refused when the format has `{scope}`
    /// and no scope is given).
    #[pyo3(signature = (n, scope=None))]
    fn render(&self, py: Python<'_>, n: i64, scope: Option<&str>) -> PyResult<String> {
        self.0.try_render(n, scope).map_err(|e| to_py_err(py, &e))
    }

    /// Whether it has a `{scope}` placeholder.
    #[getter]
    fn uses_scope(&self) -> bool {
        self.0.uses_scope()
    }

    fn __str__(&self) -> String {
        self.0.as_str().to_owned()
    }

    fn __repr__(&self) -> String {
        format!("Format({:?})", self.0.as_str())
    }
}
