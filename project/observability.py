"""The reference site's tracing wiring, configured once per process from the environment
(the apps use the OpenTelemetry API only: ``wqcore.tracing``; the logs: ``wqcore.logs``).

Tracing follows the standard ``OTEL_*`` variables. ``OTEL_TRACES_EXPORTER`` defaults to ``none``
here (no exporter, no network); ``console`` prints spans; ``otlp`` needs the OTLP exporter
package installed beside requirements.txt.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)

from wqcore import tracing

_configured = False


def _exporter(name: str) -> SpanExporter | None:
    if name in ("", "none"):
        return None
    if name == "console":
        return ConsoleSpanExporter()
    if name == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,
            )
        except ImportError as exc:
            raise ImproperlyConfigured(
                "OTEL_TRACES_EXPORTER=otlp needs opentelemetry-exporter-otlp-proto-http installed"
            ) from exc
        otlp: SpanExporter = OTLPSpanExporter()
        return otlp
    raise ImproperlyConfigured(
        f"OTEL_TRACES_EXPORTER={name!r} is not supported here: use none, console or otlp"
    )


def configure_tracing() -> None:
    """Install the SDK's tracer provider and instrument Django, once."""
    global _configured
    if _configured:
        return
    _configured = True
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return
    os.environ.setdefault("OTEL_SERVICE_NAME", "workqueue")
    provider = TracerProvider(resource=Resource.create())
    trace.set_tracer_provider(provider)
    # An SDK with no exporter records spans nobody keeps: the workers make none then.
    tracing.set_exporting(False)
    for name in os.environ.get("OTEL_TRACES_EXPORTER", "none").split(","):
        exporter = _exporter(name.strip())
        if exporter is not None:
            add_span_processor(BatchSpanProcessor(exporter))

    from django.conf import settings
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    # Its middleware right after project.ops's (first by default): the probes and scrapes are
    # not traced, and answer whatever Host they come with (the tracing reads the request's
    # absolute URL, which checks the host against ALLOWED_HOSTS).
    ops = "project.ops.OpsMiddleware"
    if ops in settings.MIDDLEWARE:
        position = str(settings.MIDDLEWARE.index(ops) + 1)
        os.environ.setdefault("OTEL_PYTHON_DJANGO_MIDDLEWARE_POSITION", position)
    if not DjangoInstrumentor().is_instrumented_by_opentelemetry:
        DjangoInstrumentor().instrument()


def add_span_processor(processor: SpanProcessor) -> None:
    """Send finished spans to ``processor`` (an exporter's, or a test's in-memory one)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        raise ImproperlyConfigured("tracing is disabled (OTEL_SDK_DISABLED=true)")
    provider.add_span_processor(processor)
    tracing.set_exporting(True)
