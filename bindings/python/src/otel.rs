//! OpenTelemetry for Python runs: the core reports its spans through `tracing` (see `tooloop::trace`); a run
//! whose span source (`tooloop._otel.span_sink`, set once by the package) hands out a sink runs under a
//! `tracing` subscriber of its own, scoped to the run, whose layer passes each span's start, fields, events
//! and end to that sink, which makes the OpenTelemetry spans. The sink is asked on the thread that starts the
//! run, in its context: the caller's current span is the run's parent.
//!
//! Must never: install a global subscriber (a host's own would lose), call the source when none is set, or
//! let the sink's exceptions reach the run (they are reported as unraisable).

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Dispatch, Event, Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// The callable asked for a run's sink (None: no OpenTelemetry).
static SOURCE: Mutex<Option<Py<PyAny>>> = Mutex::new(None);

/// Set (or clear) the span source: a callable of no arguments returning a sink or None, asked at the start
/// of each run. The sink has `start(id, parent_id, name, fields)`, `record(id, fields)`, `event(id, name,
/// fields)`, `end(id)` and a bool `content` (whether content events are wanted).
#[pyfunction]
pub fn _set_span_source(source: Option<Py<PyAny>>) {
    *crate::run::lock(&SOURCE) = source;
}

/// The subscriber of a run starting now, when the span source hands out a sink.
pub fn dispatch(py: Python<'_>) -> Option<Dispatch> {
    let source = crate::run::lock(&SOURCE).as_ref().map(|s| s.clone_ref(py))?;
    let sink = match source.call0(py) {
        Ok(s) if !s.is_none(py) => s,
        Ok(_) => return None,
        Err(e) => {
            e.write_unraisable(py, None);
            return None;
        }
    };
    let content = sink.getattr(py, "content").and_then(|c| c.extract::<bool>(py)).unwrap_or(false);
    Some(Dispatch::new(tracing_subscriber::registry().with(SinkLayer { sink, content })))
}

/// Run `f` with `dispatch` (when there is one) as this thread's subscriber.
pub fn scoped<T>(dispatch: Option<&Dispatch>, f: impl FnOnce() -> T) -> T {
    match dispatch {
        Some(d) => tracing::dispatcher::with_default(d, f),
        None => f(),
    }
}

/// Run `f` (a Python tool, on the thread the core runs it on) with its `execute_tool` span as the current
/// OpenTelemetry span, when the run reports to a sink; otherwise just `f()`.
pub fn in_tool_span<T>(py: Python<'_>, f: impl FnOnce() -> T) -> T {
    let sink = tracing::dispatcher::get_default(|d| d.downcast_ref::<SinkLayer>().map(|l| l.sink.clone_ref(py)));
    let (Some(sink), Some(id)) = (sink, tracing::Span::current().id()) else {
        return f();
    };
    let token = sink.call_method1(py, "enter", (id.into_u64(),));
    let out = f();
    match token {
        Ok(t) => {
            if let Err(e) = sink.call_method1(py, "leave", (t,)) {
                e.write_unraisable(py, None);
            }
        }
        Err(e) => e.write_unraisable(py, None),
    }
    out
}

struct SinkLayer {
    sink: Py<PyAny>,
    content: bool,
}

/// A span's or event's fields as a dict of Python values.
struct Fields<'py>(Bound<'py, PyDict>);

impl<'py> Fields<'py> {
    fn set<V: IntoPyObject<'py>>(&self, field: &Field, value: V) {
        let _ = self.0.set_item(field.name(), value);
    }
}

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.set(field, format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field, value);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field, value);
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field, value);
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field, value);
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field, value);
    }
}

impl SinkLayer {
    fn call(
        &self,
        method: &str,
        build: impl for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyTuple>>,
    ) {
        Python::attach(|py| {
            let done = build(py).and_then(|args| self.sink.call_method1(py, method, args));
            if let Err(e) = done {
                e.write_unraisable(py, None);
            }
        });
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for SinkLayer {
    fn enabled(&self, meta: &Metadata<'_>, _: Context<'_, S>) -> bool {
        meta.target().starts_with("tooloop") && (self.content || meta.target() != tooloop::TRACE_CONTENT_TARGET)
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent = ctx.span(id).and_then(|s| s.parent()).map(|p| p.id().into_u64());
        let name = attrs.metadata().name();
        self.call("start", |py| {
            let mut fields = Fields(PyDict::new(py));
            attrs.record(&mut fields);
            (id.into_u64(), parent, name, fields.0).into_pyobject(py)
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        self.call("record", |py| {
            let mut fields = Fields(PyDict::new(py));
            values.record(&mut fields);
            (id.into_u64(), fields.0).into_pyobject(py)
        });
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else { return };
        let id = span.id().into_u64();
        let meta = event.metadata();
        // Content belongs on its span as attributes (the conventions' opt-in attributes).
        let content = meta.target() == tooloop::TRACE_CONTENT_TARGET;
        self.call(if content { "record" } else { "event" }, |py| {
            let mut fields = Fields(PyDict::new(py));
            event.record(&mut fields);
            if content { (id, fields.0).into_pyobject(py) } else { (id, meta.name(), fields.0).into_pyobject(py) }
        });
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        self.call("end", |py| (id.into_u64(),).into_pyobject(py));
    }
}
