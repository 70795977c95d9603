//! `Queue`: a ticket queue — take a ticket, call the next one.

use pyo3::prelude::*;

use dispenser::queue::{Queue, QueueAlter};

use crate::convert::Json;
use crate::errors::{Outcome, to_py_err};
use crate::flavor::flavors;
use crate::handles;
use crate::runtime::run;

flavors! {
    /// A ticket queue: `take()` a ticket, `call()` the next one from a desk. Tickets are
    /// dicts (`ticket`, `label`, …) as the command line's `--json` shows them.
    "Queue", SyncQueue, AsyncQueue, Queue;

    /// The queue's name.
    #[getter]
    fn name(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.live().get(py)?.name().to_owned())
    }

    /// The settings the `ensure` that opened this handle found changed since by an alter,
    /// each `{setting, stored, asked}`: the stored value is kept, the asked one not applied.
    /// Empty for a handle from `create` or `open`, or when everything matched.
    #[getter]
    fn altered(&self, py: Python<'_>) -> PyResult<Json> {
        Ok(crate::convert::altered(self.live().get(py)?.altered()))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("Queue({:?})", self.live().get(py)?.name()))
    }

    /// The same queue acting as `caller` (whose request ids takes are scoped to).
    fn with_caller(&self, py: Python<'_>, caller: String) -> PyResult<Py<PyAny>> {
        let made = self.live().get(py)?.with_caller(&caller).map_err(|e| to_py_err(py, &e))?;
        Ok(handles::queue_as(self.live(), made, caller, Self::ASYNC).into_pyobject(py)?.unbind())
    }

    /// Takes a ticket (a dict), or with `count` a family of `count` consecutive tickets (a
    /// list). The same `request_id` again (from the same caller, within 24 hours) answers
    /// the tickets of the first take: a take safe to retry.
    #[pyo3(signature = (*, count=None, request_id=None, caller=None))]
    fn take(&self, py: Python<'_>, count: Option<u64>, request_id: Option<String>, caller: Option<String>) -> PyResult<Py<PyAny>> {
        let q = self.live().get(py)?;
        match count {
            None => run(py, Self::ASYNC, async move {
                let mut t = q.take();
                if let Some(id) = request_id {
                    t = t.request_id(id);
                }
                if let Some(c) = caller {
                    t = t.caller(c);
                }
                Outcome::Ok(Json(t.await?.to_json()))
            }),
            Some(n) => run(py, Self::ASYNC, async move {
                let mut t = q.take().count(n);
                if let Some(id) = request_id {
                    t = t.request_id(id);
                }
                if let Some(c) = caller {
                    t = t.caller(c);
                }
                Outcome::Ok(t.await?.iter().map(|t| Json(t.to_json())).collect::<Vec<_>>())
            }),
        }
    }

    /// Calls the oldest waiting ticket (or the ticket of `serial`, out of order: checked in
    /// the same write to be that ticket and to wait) from `desk`, which then shows it.
    #[pyo3(signature = (*, desk=None, serial=None, incarnation=None))]
    fn call(
        &self,
        py: Python<'_>,
        desk: Option<String>,
        serial: Option<u64>,
        incarnation: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let q = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            let incarnation = incarnation_of(incarnation)?;
            let mut c = q.call();
            if let Some(d) = desk {
                c = c.desk(d);
            }
            if let Some(s) = serial {
                c = c.serial(s);
            }
            if let Some(i) = incarnation {
                c = c.incarnation(i);
            }
            Outcome::Ok(Json(c.await?.to_json()))
        })
    }

    /// Announces again the ticket `desk` shows (only while it shows the ticket of `serial`,
    /// when given).
    #[pyo3(signature = (*, desk=None, serial=None, incarnation=None))]
    fn recall(
        &self,
        py: Python<'_>,
        desk: Option<String>,
        serial: Option<u64>,
        incarnation: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let q = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            let incarnation = incarnation_of(incarnation)?;
            let mut r = q.recall();
            if let Some(d) = desk {
                r = r.desk(d);
            }
            if let Some(s) = serial {
                r = r.serial(s);
            }
            if let Some(i) = incarnation {
                r = r.incarnation(i);
            }
            Outcome::Ok(Json(r.await?.to_json()))
        })
    }

    /// `desk` is done with the ticket it shows (only while it shows the ticket of `serial`,
    /// when given), and shows none.
    #[pyo3(signature = (*, desk=None, serial=None, incarnation=None))]
    fn finish(
        &self,
        py: Python<'_>,
        desk: Option<String>,
        serial: Option<u64>,
        incarnation: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let q = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            let incarnation = incarnation_of(incarnation)?;
            let mut r = q.finish();
            if let Some(d) = desk {
                r = r.desk(d);
            }
            if let Some(s) = serial {
                r = r.serial(s);
            }
            if let Some(i) = incarnation {
                r = r.incarnation(i);
            }
            Outcome::Ok(Json(r.await?.to_json()))
        })
    }

    /// Cancels a waiting ticket, named by its `serial` or by the `request_id` of the take
    /// that got it; the write checks that very ticket still waits.
    #[pyo3(signature = (*, serial=None, incarnation=None, request_id=None, caller=None))]
    fn cancel(
        &self,
        py: Python<'_>,
        serial: Option<u64>,
        incarnation: Option<String>,
        request_id: Option<String>,
        caller: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let q = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            let incarnation = incarnation_of(incarnation)?;
            let mut c = q.cancel();
            if let Some(s) = serial {
                c = c.serial(s);
            }
            if let Some(i) = incarnation {
                c = c.incarnation(i);
            }
            if let Some(id) = request_id {
                c = c.request_id(id);
            }
            if let Some(who) = caller {
                c = c.caller(who);
            }
            Outcome::Ok(Json(c.await?.to_json()))
        })
    }

    /// The ticket that waits with `number`, read once: act on it by its serial.
    fn waiting_ticket(&self, py: Python<'_>, number: i64) -> PyResult<Py<PyAny>> {
        let q = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            Outcome::Ok(Json(q.waiting_ticket(number).await?.to_json()))
        })
    }

    /// Changes the highest ticket; returns the status.
    #[pyo3(signature = (*, max))]
    fn alter(&self, py: Python<'_>, max: i64) -> PyResult<Py<PyAny>> {
        let q = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            Outcome::Ok(Json(q.alter(QueueAlter::default().with_max(max)).await?.to_json()))
        })
    }

    /// Deletes the queue.
    fn delete(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let q = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(q.delete().await?) })
    }

    /// Who changed it, when, how: a list of entry dicts, oldest first (at most `limit`, 100
    /// by default; `since` an aware `datetime`; `after` the `cursor` of the last entry of
    /// the previous page).
    #[pyo3(signature = (*, since=None, after=None, limit=None))]
    fn history(&self, py: Python<'_>, since: Option<&Bound<'_, PyAny>>, after: Option<String>, limit: Option<usize>) -> PyResult<Py<PyAny>> {
        let h = self.live().get(py)?.history();
        crate::dispenser::history_read(py, Self::ASYNC, h, since, after, limit)
    }

    /// Who waits, which desk shows what, the last calls: a dict.
    fn peek(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let q = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(Json(q.peek().await?.to_json())) })
    }
}

/// A queue's incarnation given in hex (a ticket's `incarnation`), checked.
fn incarnation_of(
    hex: Option<String>,
) -> Result<Option<dispenser::mongodb::bson::oid::ObjectId>, dispenser::Error> {
    hex.map(|h| {
        dispenser::mongodb::bson::oid::ObjectId::parse_str(&h).map_err(|_| {
            crate::errors::invalid(
                "incarnation",
                format!(
                    "{h:?} is not a queue's incarnation: 24 hexadecimal digits, as a ticket's `incarnation` gives it"
                ),
            )
        })
    })
    .transpose()
}
