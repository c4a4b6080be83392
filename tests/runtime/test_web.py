"""The web process: traces, metrics, and the request's tenant scope."""

from __future__ import annotations

import pytest
from django.db import connections
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from project.observability import add_span_processor
from tenancy.middleware import TenancyMiddleware
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.usefixtures("committed")


@pytest.fixture
def spans() -> InMemorySpanExporter:
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), "the SDK's provider is installed at start-up"
    exporter = InMemorySpanExporter()
    add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def test_a_request_produces_a_server_span(spans: InMemorySpanExporter) -> None:
    response = Client().get("/admin/login/")
    assert response.status_code == 200
    server = [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER]
    assert server, "the Django instrumentation records the request"
    assert server[-1].attributes.get("http.route") == "admin/login/"


def test_metrics_answer() -> None:
    Client().get("/admin/login/")
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert b"django_http_requests_total_by_method_total" in response.content


def _seen_tenant(request: HttpRequest) -> HttpResponse:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT current_setting('app.org_id', true)")
        return HttpResponse(cursor.fetchone()[0] or "")


def test_a_members_request_runs_in_its_tenant() -> None:
    member = MembershipFactory()
    request = RequestFactory().get("/", HTTP_X_REQUEST_ID="6f1c2a8e-0000-4000-8000-000000000001")
    request.user = member.user
    request.session = {}
    response = TenancyMiddleware(_seen_tenant)(request)
    assert response.content.decode() == str(member.org_id)
    assert request.op.org_id == member.org_id and request.op.user_id == member.user_id
    assert str(request.rctx.request_id) == "6f1c2a8e-0000-4000-8000-000000000001"


def test_a_stranger_runs_with_no_tenant() -> None:
    request = RequestFactory().get("/")
    request.user = UserFactory()
    request.session = {}
    assert TenancyMiddleware(_seen_tenant)(request).content == b""
    assert request.op is None and request.rctx.request_id
