"""Traces, through the OpenTelemetry API only: the site installs (or not) the SDK and exporters.

``current_traceparent()`` is what an enqueue records; ``exporting()`` says whether a worker's
per-item span would go anywhere (on a hot queue a span costs as much as the claim of the item it
describes, so none is made when none would be kept).
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

# None: decided by the tracer provider; a site that knows better says so (``set_exporting``).
_exporting: bool | None = None


def set_exporting(exporting: bool) -> None:
    """Say whether finished spans go anywhere (a site with an SDK but no exporter: False)."""
    global _exporting
    _exporting = exporting


def exporting() -> bool:
    """Whether a span made now would be kept: the site said so, or it installed a tracer
    provider (the API's own records nothing)."""
    if _exporting is not None:
        return _exporting
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.NoOpTracerProvider | trace.ProxyTracerProvider)


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the span now current, or None outside a recorded trace."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None  # no trace (most enqueues of a site that exports none): nothing to inject
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")
