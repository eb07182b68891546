"""OTLP export of the command's spans: with ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set, the command sets an OpenTelemetry SDK tracer provider whose
spans go over OTLP/HTTP (protobuf), so every run reports its spans there (see ``tooloop._otel``). The SDK and
its exporter read the standard variables themselves: the endpoints, ``OTEL_EXPORTER_OTLP_HEADERS`` /
``OTEL_EXPORTER_OTLP_TRACES_HEADERS``, timeouts, ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``
(the service is ``tooloop`` unless they name one).

Must never: import OpenTelemetry when no endpoint is set (the command's start stays as fast as without it),
or end the command before the spans are flushed (``start`` returns the flush-and-shutdown to call at exit).
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Optional

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def start() -> Optional[Callable[[], None]]:
    """Export spans when an OTLP endpoint is set: the function that flushes and stops the export, or None."""
    if not any(os.environ.get(v) for v in ENDPOINT_VARS):
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        print("tooloop: OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed, so no spans are "
              "exported: pip install 'tooloop[otel]'", file=sys.stderr)
        return None
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": "tooloop"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider.shutdown
