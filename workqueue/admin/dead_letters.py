"""The dead letters: their list (failed items, most recently failed first, through
``workitem_triage_idx``), grouped by kind and error (``groups/``), and triaged by filter
(``matching/<name>/``): every dead letter the list's filters match, by the server, in bounded
batches, fenced on the moment the operator confirmed."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied
from django.db.models import DateTimeField, ExpressionWrapper, QuerySet
from django.db.models.functions import Now
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from workqueue.admin.actions import (
    ByFilter,
    TriageAction,
    action_of_filter,
    filter_triages,
)
from workqueue.admin.display import age
from workqueue.admin.filters import (
    FailedFilter,
    KindFilter,
    LaneFilter,
    TenantFilter,
    dead_filter_of,
)
from workqueue.admin.items import WorkItemAdmin
from workqueue.admin.scope import actor_in, scope_of
from workqueue.admin.workflows import HoldingChangeList, holding_text
from workqueue.exceptions import Conflict, InvalidPayload, NotFound
from workqueue.models import Status, WorkItem
from workqueue.triage import (
    ERROR_CONTAINS_MAX,
    SCAN_MAX,
    Counted,
    DeadFilter,
    Drawn,
    act_on_every_match,
    count_dead,
    group_dead,
    parse_since,
)
from workqueue.triage.dry_run import dry_run
from wqcore.conf import wq_settings

CHANGELIST = "admin:workqueue_deadletter_changelist"


def _count_field(request: HttpRequest, name: str) -> int:
    """A count the confirmation page carries (0 when absent or not a count)."""
    text = request.POST.get(name, "")
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else 0


class DeadLetterAdmin(WorkItemAdmin):
    """Failed items, most recently failed first; filtered by when they failed, searched by
    error text (within a window: ``dead_filter_of``), grouped, and triaged by filter."""

    # A dead letter is final: no action on live items (cancel) is offered here.
    statuses = frozenset({Status.FAILED.value})
    list_display = (
        "short_id",
        "tenant",
        "kind",
        "lane",
        "tries",
        "error",
        "holds_up",
        "failed",
        "created",
    )
    list_filter = (TenantFilter, KindFilter, LaneFilter, FailedFilter)
    ordering = ("-updated_at",)
    search_help_text = (
        "An item's id (exact), or text in its error (any case; within the 'failed' filter, "
        "else the last TRIAGE_SEARCH_WINDOW_S)."
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).filter(status=Status.FAILED)

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        return lookup == FailedFilter.since_parameter or super().lookup_allowed(
            lookup, value, request
        )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        """An id, or text in the error: read by when the items failed, so a search without a
        "failed" filter looks at the last ``TRIAGE_SEARCH_WINDOW_S`` only (the same rows
        ``DeadFilter`` matches)."""
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            return queryset.filter(pk=uuid.UUID(term)), False
        except ValueError:
            pass
        found = queryset.filter(last_error__icontains=term[:ERROR_CONTAINS_MAX])
        if not (request.GET.get("failed") or request.GET.get(FailedFilter.since_parameter)):
            window = timedelta(seconds=wq_settings.TRIAGE_SEARCH_WINDOW_S)
            floor = ExpressionWrapper(Now() - window, output_field=DateTimeField())
            found = found.filter(updated_at__gte=floor)
        return found, False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> Any:
        query = request.GET.copy()
        for ignored in ("p", "o", "e", "_changelist_filters"):
            query.pop(ignored, None)
        extra = {
            "filter_query": query.urlencode(),
            "filter_triages": filter_triages(),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[HoldingChangeList]:
        return HoldingChangeList

    @admin.display(description="holds up")
    def holds_up(self, item: WorkItem) -> str:
        """The workflow a dead step holds up, and how many of its steps wait for it."""
        return holding_text(getattr(item, "holding", None))

    @admin.display(description="failed")
    def failed(self, item: WorkItem) -> str:
        return format_html('<span title="{}">{} ago</span>', item.updated_at, age(item.updated_at))

    # -- grouped, and triage by filter --

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view
        return [
            path("groups/", view(self.groups_view), name="workqueue_deadletter_groups"),
            path(
                "matching/<str:action>/",
                view(self.matching_view),
                name="workqueue_deadletter_matching",
            ),
            path(
                "<path:object_id>/dry-run/",
                view(self.dry_run_view),
                name="workqueue_deadletter_dry_run",
            ),
            *super().get_urls(),
        ]

    # -- dry run --

    def dry_run_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """A dead letter's dry run (``triage/dry_run.py``): the payload to run with (its own,
        or an edit), then the report, and from it the real requeue in one click, fenced on the
        item as this page drew it (its status and ``updated_at``)."""
        if not self.has_triage_permission(request):
            raise PermissionDenied
        item = self.get_object(request, object_id)
        if item is None:
            raise Http404(f"dead letter {object_id} not found")
        original = json.dumps(item.payload, indent=2, sort_keys=True)
        text = request.POST.get("payload", original) if request.method == "POST" else original
        report, problem = None, None
        if request.method == "POST":
            payload = None
            try:
                edited = json.loads(text)
            except ValueError as exc:
                problem = f"payload: not valid JSON ({exc})"
            else:
                payload = None if edited == item.payload else edited
            if problem is None:
                try:
                    report = dry_run(actor_in(request, item.org_id).user_id, item.id, payload)
                except (InvalidPayload, Conflict, NotFound) as exc:
                    problem = str(exc)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Dry run of {item.kind} {item.pk}",
            "opts": self.opts,
            "item": item,
            "payload_text": text,
            "report": report,
            "problem": problem,
            "fence": Drawn.of(item).token(),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/workqueue/deadletter/dry_run.html", context)

    def hand_over(self, request: HttpRequest, action: TriageAction) -> HttpResponse | None:
        """A "select all" of the list, for an action with a triage by filter: that triage, of
        what the list shows."""
        if action.by_filter is None:
            return None
        url = reverse("admin:workqueue_deadletter_matching", args=[action.by_filter.name])
        return HttpResponseRedirect(f"{url}?{request.GET.urlencode()}")

    def _filter_or_refuse(self, request: HttpRequest) -> DeadFilter | None:
        try:
            return dead_filter_of(request)
        except InvalidPayload as exc:
            self.message_user(request, f"{exc}; nothing was changed.", messages.ERROR)
            return None

    def groups_view(self, request: HttpRequest) -> HttpResponse:
        """The dead letters the list's filters match, grouped by kind and their error's first
        line, most first: how many, first and last failed; each group one click to its items."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        dead = self._filter_or_refuse(request)
        if dead is None:
            return HttpResponseRedirect(reverse(CHANGELIST))
        grouped = group_dead(dead, scope_of(request))
        keep = request.GET.copy()
        for name in ("q", "kind", "p", "o", "e"):
            keep.pop(name, None)
        rows = []
        for group in grouped.groups:
            query = keep.copy()
            query["kind"] = group.kind
            if group.error:
                query["q"] = group.error[:ERROR_CONTAINS_MAX]
            rows.append((group, query.urlencode()))
        context = {
            **self.admin_site.each_context(request),
            "title": "Dead letters by kind and error",
            "opts": self.opts,
            "grouped": grouped,
            "rows": rows,
            "scan_max": SCAN_MAX,
            "filter": dead.described(),
            "filter_query": request.GET.urlencode(),
            "triage": self.has_triage_permission(request),
            "filter_triages": filter_triages(),
        }
        return TemplateResponse(request, "admin/workqueue/deadletter/groups.html", context)

    def matching_view(self, request: HttpRequest, action: str) -> HttpResponse:
        """An action on every dead letter the list's filters match: a confirmation page (how
        many, as of the database's now()), then, on its confirmation, the triage by filter
        fenced on that moment, in bounded batches."""
        if not self.has_triage_permission(request):
            raise PermissionDenied
        chosen = action_of_filter(action)
        if chosen is None or chosen.by_filter is None:
            names = " or ".join(matching.name for matching in filter_triages())
            raise PermissionDenied(f"action: {names}")
        dead = self._filter_or_refuse(request)
        if dead is None:
            return HttpResponseRedirect(reverse(CHANGELIST))
        if request.method == "POST" and request.POST.get("confirm") == "yes":
            return self._act_on_matching(request, chosen, chosen.by_filter, dead)
        counted = count_dead(dead, scope_of(request))
        return self._matching_page(
            request, chosen, chosen.by_filter, dead, counted, counted.read_at, 0
        )

    def _act_on_matching(
        self, request: HttpRequest, action: TriageAction, matching: ByFilter, dead: DeadFilter
    ) -> HttpResponse:
        """Run the confirmed triage by filter within its budget (``TRIAGE_MAX_BATCHES``):
        back to the list when it is done, else its page again, to resume from."""
        try:
            until = parse_since(request.POST.get("until", ""), "until")
        except InvalidPayload as exc:
            self.message_user(request, f"{exc}; nothing was changed.", messages.ERROR)
            return HttpResponseRedirect(reverse(CHANGELIST))
        scope = scope_of(request)
        swept = act_on_every_match(
            matching.name, dead, until, lambda org_id: actor_in(request, org_id), scope
        )
        done_so_far = _count_field(request, "done_so_far") + swept.changed
        if not swept.done:
            counted = count_dead(dead, scope, until)
            return self._matching_page(request, action, matching, dead, counted, until, done_so_far)
        # What the page counted, less what changed: the items changed meanwhile (requeued,
        # retried, failed again or purged since the moment confirmed), left as they are.
        left_alone = max(_count_field(request, "shown") - done_so_far, swept.left_alone)
        if left_alone:
            self.message_user(
                request,
                f"{left_alone} item(s) changed since you confirmed and were left as they are.",
                messages.WARNING,
            )
        self.message_user(
            request, f"{matching.verb} by filter: done for {done_so_far} item(s).", messages.SUCCESS
        )
        back = request.GET.copy()
        if scope is not None:
            back.pop("org", None)  # not a filter of a tenant's staff's list
        return HttpResponseRedirect(f"{reverse(CHANGELIST)}?{back.urlencode()}")

    def _matching_page(
        self,
        request: HttpRequest,
        action: TriageAction,
        matching: ByFilter,
        dead: DeadFilter,
        counted: Counted,
        until: datetime,
        done_so_far: int,
    ) -> TemplateResponse:
        """The triage by filter's confirmation page, fenced on ``until``, or its page to
        resume from (``done_so_far`` items done)."""
        # The form posts the filter as shown: a window ("the last hour") as the moment it
        # stood for, so the run acts on the rows this page counted.
        frozen = request.GET.copy()
        if dead.failed_since is not None:
            frozen.pop("failed", None)
            frozen[FailedFilter.since_parameter] = dead.failed_since.isoformat()
        context = {
            **self.admin_site.each_context(request),
            "title": f"{matching.verb} every dead letter this filter matches: confirm",
            "shown": _count_field(request, "shown") if done_so_far else counted.items,
            "frozen_query": frozen.urlencode(),
            "opts": self.opts,
            "action": action,
            "matching": matching,
            "counted": counted,
            "until": until.isoformat(),
            "done_so_far": done_so_far,
            "filter": dead.described(),
            "filter_query": request.GET.urlencode(),
            "batch": wq_settings.TRIAGE_BATCH,
            "budget": wq_settings.TRIAGE_BATCH * wq_settings.TRIAGE_MAX_BATCHES,
            "scan_max": SCAN_MAX,
        }
        return TemplateResponse(request, "admin/workqueue/deadletter/matching.html", context)
