"""The queue gauges page in the admin, reached from the admin's index like any list of it (its
entry is a proxy model's), without replacing the site's index."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from tenancy.admin_fence import AdminRights, is_operator
from tenancy.contexts import actor_of
from workers import dashboard, fleet, schedule_state
from workers.models import QueueGauges
from wqcore.generics import ModelAdmin

# The permission that lets the operator drain or stop a worker (a superuser holds every one).
CONTROL_PERMISSION = "workqueue_workers.change_worker"


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
        view = self.admin_site.admin_view
        workers = path("workers/", view(self.workers_view), name="workqueue_workers_workers")
        drain = path(
            "workers/<path:worker_id>/drain/",
            view(require_POST(self.drain_worker)),
            name="workqueue_workers_worker_drain",
        )
        stop = path(
            "workers/<path:worker_id>/stop/",
            view(require_POST(self.stop_worker)),
            name="workqueue_workers_worker_stop",
        )
        return [toggle, workers, drain, stop, *super().get_urls()]

    def workers_view(self, request: HttpRequest) -> HttpResponse:
        """Every worker not offline: host, pid, lane, kinds, heartbeat, what it holds (each item
        linked), and the drain and stop for an operator who may. The operator's page only:
        workers serve every tenant."""
        if not is_operator(request):
            raise PermissionDenied("the workers page is for the site's operator")
        context = {
            **self.admin_site.each_context(request),
            "title": "Workers",
            "workers": fleet.read_fleet(dashboard.SILENT_AFTER_S),
            "may_control": request.user.has_perm(CONTROL_PERMISSION),
            "silent_after_s": dashboard.SILENT_AFTER_S,
            "held_shown": fleet.HELD_SHOWN,
            "read_at": timezone.now(),
        }
        return TemplateResponse(request, "admin/workqueue_workers/workers.html", context)

    def drain_worker(self, request: HttpRequest, worker_id: str) -> HttpResponse:
        """Ask one worker to drain (``fleet.drain``), audited with the operator as the actor."""
        return self._ask(
            request,
            worker_id,
            fleet.drain,
            "asked to drain: at its next heartbeat it stops claiming, finishes what it holds and "
            "goes offline",
            "is not running",
        )

    def stop_worker(self, request: HttpRequest, worker_id: str) -> HttpResponse:
        """Ask one worker to stop now (``fleet.stop``), audited with the operator as the actor."""
        return self._ask(
            request,
            worker_id,
            fleet.stop,
            "asked to stop now: at its next heartbeat it cancels what it runs, releases each item "
            "and goes offline",
            "is neither running nor draining",
        )

    def _ask(
        self,
        request: HttpRequest,
        worker_id: str,
        ask: Callable[..., bool],
        done: str,
        refused: str,
    ) -> HttpResponse:
        if not (is_operator(request) and request.user.has_perm(CONTROL_PERMISSION)):
            raise PermissionDenied("draining or stopping a worker is for the site's operator")
        asked = ask(
            worker_id,
            actor=actor_of(request.user),
            request_id=request.rctx.request_id,  # type: ignore[attr-defined]
            via="the admin's workers page",
        )
        if asked:
            messages.success(request, f"worker {worker_id} {done}")
        else:
            messages.warning(request, f"worker {worker_id} {refused} (nothing was asked)")
        return HttpResponseRedirect(reverse("admin:workqueue_workers_workers"))

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
