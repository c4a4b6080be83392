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


def task_enqueue(request: HttpRequest) -> HttpResponse:
    """Django's task API in a view: the tenancy middleware names the member's context."""
    from tests.tasks import add

    result = add.enqueue(1, 2)
    if request.GET.get("fail"):
        raise RuntimeError("the view failed after enqueueing a task")
    return HttpResponse(result.id, status=201)


async def task_aenqueue(request: HttpRequest) -> HttpResponse:
    from tests.tasks import add

    result = await add.aenqueue(3, 4)
    read = await add.aget_result(result.id)
    return HttpResponse(read.id, status=201)


def task_result(request: HttpRequest, result_id: str) -> HttpResponse:
    from workers.django_tasks.compat import TaskResultDoesNotExist, default_task_backend

    try:
        result = default_task_backend.get_result(result_id)
    except TaskResultDoesNotExist:
        return HttpResponse(status=404)
    return HttpResponse(result.status)


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
    path("test/task/", task_enqueue),
    path("test/atask/", task_aenqueue),
    path("test/task/<str:result_id>/", task_result),
    path("", include("project.urls")),
]
