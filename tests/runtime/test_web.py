"""The web process: traces, metrics, and the request's tenant scope."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from project.observability import add_span_processor
from tests.factories import MembershipFactory, OrgFactory, UserFactory
from workqueue.models import WorkItem

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
    from prometheus_client import REGISTRY

    before = REGISTRY.get_sample_value(
        "workqueue_web_requests_total", {"method": "GET", "status": "200"}
    )
    Client().get("/admin/login/")
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert b"workqueue_web_requests_total" in response.content
    after = REGISTRY.get_sample_value(
        "workqueue_web_requests_total", {"method": "GET", "status": "200"}
    )
    # The scrape itself is not counted.
    assert after == (before or 0) + 1


def test_healthz_answers_whatever_the_host() -> None:
    response = Client(HTTP_HOST="not-an-allowed-host.example").get("/healthz")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.json() == {"database": "ok", "migrations": "applied", "healthy": True}


def _member_client(member) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(member.user)
    return client


@override_settings(ROOT_URLCONF="tests.web_urls")
def test_a_members_request_runs_in_its_tenant() -> None:
    member = MembershipFactory()
    response = _member_client(member).get(
        "/test/tenant/", HTTP_X_REQUEST_ID="6f1c2a8e-0000-4000-8000-000000000001"
    )
    assert response.content.decode() == str(member.org_id)
    assert response.wsgi_request.op.org_id == member.org_id
    assert response.wsgi_request.op.user_id == str(member.user_id)
    assert str(response.wsgi_request.rctx.request_id) == "6f1c2a8e-0000-4000-8000-000000000001"


@override_settings(ROOT_URLCONF="tests.web_urls")
def test_a_stranger_runs_with_no_tenant() -> None:
    client = Client()
    client.force_login(UserFactory())
    response = client.get("/test/tenant/")
    assert response.content == b""
    assert response.wsgi_request.op is None and response.wsgi_request.rctx.request_id


@override_settings(ROOT_URLCONF="tests.web_urls")
def test_a_template_response_renders_in_the_tenant() -> None:
    member = MembershipFactory()
    response = _member_client(member).get("/test/tenant-at-render/")
    assert response.content.decode().strip() == str(member.org_id)


@override_settings(ROOT_URLCONF="tests.web_urls")
def test_a_view_that_raises_commits_nothing() -> None:
    """Issue 8.3: the scope wraps the view, so its exception rolls the enqueue back (a scope
    around the middleware chain would see Django's 500 response and commit)."""
    member = MembershipFactory()
    client = _member_client(member)
    client.raise_request_exception = False
    response = client.get("/test/enqueue-then-raise/")
    assert response.status_code == 500
    assert WorkItem.objects.using("admin").count() == 0
    ok = client.get("/test/enqueue/")
    assert ok.status_code == 201
    assert WorkItem.objects.using("admin").filter(org_id=member.org_id).count() == 1


@override_settings(ROOT_URLCONF="tests.web_urls")
def test_naming_an_org_the_user_is_not_a_member_of_is_refused() -> None:
    member = MembershipFactory()
    stranger_org = OrgFactory()
    client = _member_client(member)
    assert client.get("/test/tenant/", HTTP_X_ORG_ID=str(stranger_org.pk)).status_code == 403
    assert client.get("/test/tenant/", HTTP_X_ORG_ID="not-a-uuid").status_code == 403
    second = MembershipFactory(user=member.user)
    chosen = client.get("/test/tenant/", HTTP_X_ORG_ID=str(second.org_id))
    assert chosen.content.decode() == str(second.org_id)


def test_the_queue_gauges_are_on_the_webs_metrics_queue_only() -> None:
    from workers.gauges import GAUGES

    GAUGES.forget()
    page = Client().get("/metrics/queue").content.decode()
    assert 'workqueue_queue_oldest_age_seconds{lane="default"}' in page
    assert "workqueue_outbox_lag_seconds" in page and "workqueue_work_failed" in page
    assert "workqueue_queue_oldest_age_seconds" not in Client().get("/metrics").content.decode()
