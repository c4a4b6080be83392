"""The landing page, and error answers that speak JSON under /api/."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import defaults

from workqueue.runtime import json_error, known_kinds


def landing(request: HttpRequest) -> HttpResponse:
    """What this is, and where to go: the admin, the gauges, the demo, the API."""
    return render(
        request, "landing.html", {"kinds": known_kinds(), "op": getattr(request, "op", None)}
    )


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def forbidden(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        # The API's shape: a reason "<field>: <why>" names its field (X-Org-ID).
        return json_error(403, str(exception) or "forbidden")
    return defaults.permission_denied(request, exception)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"error": "not found"}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest, *args: Any) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"error": "the server failed; nothing was stored"}, status=500)
    return defaults.server_error(request)
