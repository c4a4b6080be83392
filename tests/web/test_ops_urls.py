"""The web's health and metrics as a site of its own gets them: ``workers.urls`` included with
one line (here under a prefix), behind the site's whole middleware chain, without the reference
site's middleware that answers them first."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.urls import include, path

from tests.web.conftest import Person

pytestmark = pytest.mark.usefixtures("committed")

urlpatterns = [
    path("ops/", include("workers.urls")),
    path("", include("project.urls")),
]


@pytest.fixture(autouse=True)
def _a_site_of_its_own(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ROOT_URLCONF = __name__
    ours = "project.ops.OpsMiddleware"
    settings.MIDDLEWARE = [m for m in django_settings.MIDDLEWARE if m != ours]


def test_healthz_answers_200_with_what_it_checked() -> None:
    response = Client().get("/ops/healthz")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.json() == {"database": "ok", "migrations": "applied", "healthy": True}
    assert response.wsgi_request.op is None  # no tenant's scope


def test_a_signed_in_members_probe_runs_in_no_tenant(member) -> None:  # type: ignore[no-untyped-def]
    someone: Person = member(staff=False)
    response = someone.client.get("/ops/healthz")
    assert response.status_code == 200
    assert response.wsgi_request.op is None


def test_metrics_are_prometheus_text() -> None:
    own = Client().get("/ops/metrics")
    assert own.status_code == 200 and own["Content-Type"].startswith("text/plain")
    assert b"python_info" in own.content
    queue = Client().get("/ops/metrics/queue")
    assert queue.status_code == 200 and queue["Content-Type"].startswith("text/plain")
    assert b"workqueue_work_failed" in queue.content
    assert b"python_info" not in queue.content  # the gauges alone


@pytest.mark.parametrize("where", ["/ops/healthz", "/ops/metrics", "/ops/metrics/queue"])
def test_only_get_and_head_are_answered(where: str) -> None:
    client = Client(enforce_csrf_checks=True)
    refused = client.post(where)
    assert refused.status_code == 405 and refused["Allow"] == "GET, HEAD"
    assert client.head(where).status_code == 200
