"""The queue gauges page in the admin, reached from the admin's index like any list of it (its
entry is a proxy model's), without replacing the site's index."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_POST

from tenancy.admin_fence import AdminRights, is_operator
from tenancy.contexts import actor_of
from workers import dashboard, schedule_state
from workers.models import QueueGauges
from wqcore.generics import ModelAdmin


@admin.register(QueueGauges)
class QueueGaugesAdmin(AdminRights, ModelAdmin[QueueGauges]):
    """The site's operator and the viewers see every tenant's figures; a tenant's staff their
    tenant's."""

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return dashboard.gauges(request)

    def get_urls(self) -> list[URLPattern]:
        toggle = path(
            "schedules/<str:name>/toggle/",
            self.admin_site.admin_view(require_POST(self.toggle_schedule)),
            name="workqueue_workers_schedule_toggle",
        )
        return [toggle, *super().get_urls()]

    def toggle_schedule(self, request: HttpRequest, name: str) -> HttpResponse:
        """Pause or resume one schedule (the operator only), audited in every tenant it
        serves with the operator as the actor; fenced on the state the page showed (a pause
        of a schedule paused meanwhile changes nothing, and says so)."""
        if not is_operator(request):
            raise PermissionDenied("pausing a schedule is for the site's operator")
        action = request.POST.get("action")
        if action not in ("pause", "resume"):
            raise PermissionDenied("action: must be pause or resume")
        change = schedule_state.pause if action == "pause" else schedule_state.resume
        try:
            state = change(
                name,
                actor=actor_of(request.user),
                rctx=request.rctx,  # type: ignore[attr-defined]
                via="the admin's queue gauges",
            )
        except LookupError as exc:
            messages.error(request, str(exc.args[0]))
        else:
            if state is None:
                already = "already" if action == "pause" else "not"
                messages.warning(request, f"schedule {name} is {already} paused")
            else:
                messages.success(request, f"schedule {name} {action}d")
        return HttpResponseRedirect(reverse("admin:workqueue_workers_queuegauges_changelist"))
