"""Views that exist only for tests of the request's tenant scope, beside the product's URLs."""

from __future__ import annotations

from django.db import connections
from django.http import HttpRequest, HttpResponse
from django.template import engines
from django.template.response import TemplateResponse
from django.urls import include, path

from workqueue.api import enqueue


def seen_tenant(request: HttpRequest) -> HttpResponse:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT current_setting('app.org_id', true)")
        return HttpResponse(cursor.fetchone()[0] or "")


def enqueue_then_raise(request: HttpRequest) -> HttpResponse:
    enqueue(request.op, "NOOP", {"n": 1})  # type: ignore[attr-defined]
    raise RuntimeError("the view failed after enqueueing")


def enqueue_then_answer(request: HttpRequest) -> HttpResponse:
    item, _ = enqueue(request.op, "NOOP", {"n": 2})  # type: ignore[attr-defined]
    return HttpResponse(str(item.id), status=201)


class _Lazy:
    """Reads the tenant only when the template renders it."""

    def __str__(self) -> str:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT current_setting('app.org_id', true)")
            return cursor.fetchone()[0] or ""


def tenant_at_render(request: HttpRequest) -> TemplateResponse:
    template = engines["django"].from_string("{{ tenant }}")
    return TemplateResponse(request, template, {"tenant": _Lazy()})


urlpatterns = [
    path("test/tenant/", seen_tenant),
    path("test/enqueue-then-raise/", enqueue_then_raise),
    path("test/enqueue/", enqueue_then_answer),
    path("test/tenant-at-render/", tenant_at_render),
    path("", include("project.urls")),
]
