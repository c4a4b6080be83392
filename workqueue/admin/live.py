"""An item's page kept live (``workitem/<id>/live/``): its status, attempts and progress as JSON,
read as the page itself is (the operator on the system login, a tenant's staff under row-level
security: another tenant's item is a 404), polled by the page every ``POLL_S`` while it is in
view and the item is not finished. Without JavaScript the page is what it was: a reload shows
the same. Polling, not a stream: a stream holds a web worker (and a LISTEN session) per open
page, and a proxy may cut or buffer it; a poll is one indexed read by id."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, JsonResponse
from django.urls import path, reverse

from workqueue.admin.display import progress_text, share
from workqueue.models import Status, WorkItem
from workqueue.progress import NOTE_MAX

# How often an open page asks (the page says so to the script).
POLL_S = 2.0
# Statuses after which nothing changes on its own (a requeue is a human's, and reloads the page).
FINISHED = frozenset({Status.DONE, Status.FAILED, Status.CANCELLED, Status.DISCARDED})


def live_state(item: WorkItem) -> dict[str, Any]:
    """What the page shows that a running item changes: status, attempts, progress."""
    progress = item.progress or {}
    return {
        "status": item.status,
        "status_label": Status(item.status).label,
        "attempts": item.attempts,
        "finished": item.status in FINISHED,
        "progress_line": progress_text(item.progress, NOTE_MAX),
        "progress_share": share(item.progress),
        "progress_at": progress.get("at"),
        "updated_at": item.updated_at.isoformat(),
    }


class LivePages:
    """The live endpoint of an item's page, on the items' admin (a mixin of ``WorkItemAdmin``)."""

    admin_site: Any
    model: Any

    def live_urls(self) -> list[Any]:
        if self.model is not WorkItem:
            return []
        return [
            path(
                "<path:object_id>/live/",
                self.admin_site.admin_view(self.live_view),
                name="workqueue_workitem_live",
            )
        ]

    def live_url(self, item: WorkItem) -> str | None:
        """Where the page asks (None: a page of another model, or an item nothing changes)."""
        if self.model is not WorkItem or item.status in FINISHED:
            return None
        return reverse("admin:workqueue_workitem_live", args=[item.pk])

    def live_view(self, request: HttpRequest, object_id: str) -> JsonResponse:
        item = self.get_object(request, object_id)  # type: ignore[attr-defined]
        if item is None or not self.has_view_permission(request, item):  # type: ignore[attr-defined]
            raise Http404("no such item")
        # The admin's view wrapper marks it never cached.
        return JsonResponse(live_state(item))
