"""OpenTelemetry spans of tooloop's runs, made from the core's own spans.

The Rust core reports a span per run (``invoke_agent``), model request (``chat {model}``, its retries as
``retry`` events), tool call (``execute_tool {name}``) and compaction through ``tracing``, with the GenAI
semantic conventions' names (semantic-conventions 1.37, ``gen_ai.provider.name``; see src/trace.rs). When
``opentelemetry-api`` is in use and a tracer provider is set (not the default proxy or no-op one), the
compiled module runs each run under a subscriber of its own whose layer calls a ``_Sink`` of this module:
the sink makes the OpenTelemetry spans, the first under the caller's current span (asked on the thread that
starts the run, in its context: ``arun``/``astream`` start it in the awaiting task's context). Parallel tool
calls, child agents and streamed runs go through the same subscriber, so their spans keep their parents.

Content (the model's answers, tool arguments and results; redacted like tool output) only with the
conventions' opt-in: ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` set to ``true``, ``span_only``
or ``span_and_event`` (the value OpenTelemetry's Python GenAI instrumentations read).

Must never: import ``opentelemetry`` when the program has not (``span_sink`` looks at ``sys.modules``
first, so a program without OpenTelemetry pays one dict lookup per run), or let a failure here fail a run.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Optional

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CONTENT_ON = {"true", "1", "span_only", "span_and_event"}


def capture_content() -> bool:
    """Whether the user opted in to content on spans (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``)."""
    return os.environ.get(CONTENT_ENV, "").strip().lower() in _CONTENT_ON


def span_sink() -> Optional[_Sink]:
    """The sink of a run starting now, or None: OpenTelemetry not imported, or no tracer provider set."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import context, trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    from ._tooloop import __version__

    return _Sink(provider.get_tracer("tooloop", __version__), context.get_current(), capture_content())


class _Sink:
    """One run's spans: the core's span ids to OpenTelemetry spans (called by the compiled module, from
    whichever thread the core is on, with the GIL held)."""

    def __init__(self, tracer: Any, parent: Any, content: bool) -> None:
        self._tracer = tracer
        self._parent = parent
        self.content = content
        self._spans: Dict[int, Any] = {}

    def start(self, id: int, parent: Optional[int], name: str, fields: Dict[str, Any]) -> None:
        from opentelemetry import trace

        _arrays(fields)

        name = fields.pop("otel.name", None) or name
        kind = trace.SpanKind.CLIENT if fields.pop("otel.kind", None) == "client" else trace.SpanKind.INTERNAL
        failed = fields.pop("otel.status_code", None) == "error"
        above = self._spans.get(parent) if parent is not None else None
        ctx = trace.set_span_in_context(above, self._parent) if above is not None else self._parent
        span = self._tracer.start_span(name, context=ctx, kind=kind, attributes=fields)
        if failed:
            span.set_status(trace.StatusCode.ERROR)
        self._spans[id] = span

    def record(self, id: int, fields: Dict[str, Any]) -> None:
        span = self._spans.get(id)
        if span is None:
            return
        _arrays(fields)
        for key, value in fields.items():
            if key == "otel.name":
                span.update_name(value)
            elif key == "otel.status_code":
                if value == "error":
                    from opentelemetry import trace

                    span.set_status(trace.StatusCode.ERROR)
            elif key != "otel.kind":
                span.set_attribute(key, value)

    def event(self, id: int, name: str, fields: Dict[str, Any]) -> None:
        span = self._spans.get(id)
        if span is not None:
            span.add_event(name, fields)

    def enter(self, id: int) -> Any:
        """Make span ``id`` current (a Python tool runs inside its execute_tool span); the token for ``leave``."""
        span = self._spans.get(id)
        if span is None:
            return None
        from opentelemetry import context, trace

        return context.attach(trace.set_span_in_context(span, self._parent))

    def leave(self, token: Any) -> None:
        if token is not None:
            from opentelemetry import context

            context.detach(token)

    def end(self, id: int) -> None:
        span = self._spans.pop(id, None)
        if span is not None:
            span.end()


# `tracing` fields have no arrays: the core records string[] attributes as JSON text.
_ARRAYS = ("gen_ai.response.finish_reasons",)


def _arrays(fields: Dict[str, Any]) -> None:
    for key in _ARRAYS:
        value = fields.get(key)
        if isinstance(value, str) and value.startswith("["):
            import json

            fields[key] = [str(v) for v in json.loads(value)]
