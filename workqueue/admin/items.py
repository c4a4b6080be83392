"""The work items' list and detail pages.

Who sees which tenant's items, and how, is ``tenancy/admin_fence.py``'s rule: the operator
reads every tenant on the system login; a tenant's staff read theirs under row-level security.

The list stays fast on a million rows: no full count (``BoundedPaginator``), no facets, no
sortable columns (each would sort the whole table), filters drawn from the kind registry rather
than from ``DISTINCT`` over the table, newest first by the time-ordered id (the primary key).
Its search (``search.py``) reads what an index serves, and the rest among the newest items
only, saying so; its two other orders (oldest waiting, most attempts) read the hot table's
pending or unfinished items, never history; its saved filters are links (``SAVED_FILTERS``).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html

from audit.api import AuditEntry, actor_names
from tenancy.admin_fence import admin_alias, shows_tenants
from workqueue.admin.actions import TriageAction
from workqueue.admin.confirmation import TriageAdmin
from workqueue.admin.display import age, first_line, progress_text, share, trace_link
from workqueue.admin.filters import (
    SAVED_FILTERS,
    CreatedFilter,
    FinishedFilter,
    KindFilter,
    LaneFilter,
    OrderFilter,
    ScanFilter,
    TenantFilter,
    order_of,
)
from workqueue.admin.live import POLL_S, LivePages, live_state
from workqueue.admin.scope import scope_of, tenants_have_names
from workqueue.admin.search import read_terms, search
from workqueue.admin.workflows import WorkflowPages, counted, workflow_link
from workqueue.exceptions import InvalidPayload
from workqueue.models import Attempt, Status, WorkItem
from workqueue.progress import NOTE_MAX
from workqueue.workflows.overview import read_holding

# The most attempts an item's page lists (the first ones: an item runs out of attempts long
# before; one an operator requeued many times shows its first this many).
ATTEMPTS_SHOWN = 200
# The most audit entries an item's page lists, oldest first.
HISTORY_SHOWN = 200
# The statuses an item ends in: its "finished" column shows when (its updated_at).
ENDED = frozenset({Status.DONE, Status.FAILED, Status.DISCARDED, Status.CANCELLED})


def _pretty(value: Any) -> str | None:
    """A stored JSON value, indented for reading (None: nothing stored)."""
    if value is None:
        return None
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


class WorkItemAdmin(WorkflowPages, LivePages, TriageAdmin):
    statuses = frozenset(Status.values)
    # Typed as any tuple: the dead-letter list shows other columns and filters.
    list_display: tuple[str, ...] = (
        "short_id",
        "tenant",
        "kind",
        "lane",
        "status",
        "progress_shown",
        "tries",
        "worker",
        "error",
        "workflow",
        "age_shown",
        "created",
        "finished",
    )
    list_display_links = ("short_id",)
    list_filter: ClassVar[tuple[type[admin.ListFilter] | str, ...]] = (
        TenantFilter,
        KindFilter,
        LaneFilter,
        "status",
        CreatedFilter,
        FinishedFilter,
        OrderFilter,
        ScanFilter,
    )
    search_fields = ("id", "idempotency_key")
    search_help_text = (
        "An id or idempotency key (exact); kind:NAME or kind:PREFIX*; status:NAME; "
        "payload.PATH=VALUE (payload.order_id=42); error:TEXT; worker:ID; created>=WHEN, "
        "created<WHEN, finished>=WHEN, finished<WHEN (2026-12-01T09:30:00+00:00, a date, "
        "or 30m, 6h, 2d ago). Terms no index serves read the newest items only, and say so."
    )
    # Time-ordered ids (UUIDv7): newest first is the primary key read backwards.
    ordering = ("-id",)
    sortable_by = ()
    list_per_page = 50
    change_form_template = "admin/workqueue/workitem/change_form.html"
    # The operator's tenant column, and the item's tenant on its page (a single-tenant site's
    # pages name none).
    tenant_columns = ("tenant", "org_id")
    readonly_fields = ("author", "trace", "last_signed_by")
    fieldsets = (
        (None, {"fields": ("id", "org_id", "kind", "lane", "status", "priority")}),
        (
            "Attempts",
            {
                "fields": (
                    "attempts",
                    "max_attempts",
                    "available_at",
                    "idempotency_key",
                    "concurrency_key",
                    "rate_key",
                )
            },
        ),
        (
            "Claim and lease",
            {
                "fields": (
                    "claimed_by",
                    "claimed_at",
                    "claim_token",
                    "lease_expires_at",
                    "cancel_requested_at",
                )
            },
        ),
        (
            "Origin",
            {
                "fields": (
                    "author",
                    "request_id",
                    "trace",
                    "created_at",
                    "updated_at",
                    "last_signed_by",
                )
            },
        ),
    )

    def get_urls(self) -> list[Any]:
        return [*self.workflow_urls(), *self.live_urls(), *super().get_urls()]

    # -- who --

    def get_list_filter(self, request: HttpRequest) -> tuple[Any, ...]:
        if shows_tenants(request):
            return self.list_filter
        return tuple(f for f in self.list_filter if f is not TenantFilter)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if not tenants_have_names():
            return queryset
        from tenancy.models import Org

        # The org's name for the list, read in the same statement on the same login.
        names = Org.objects.filter(pk=OuterRef("org_id")).values("name")[:1]
        return queryset.annotate(tenant_name=Subquery(names))

    # -- the list --

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        chosen = order_of(request) if OrderFilter in self.get_list_filter(request) else None
        return chosen or tuple(self.ordering)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> Any:
        extra = {"saved_filters": SAVED_FILTERS, **(extra_context or {})}
        return super().changelist_view(request, extra)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        """The items every term of the search matches (``search.py``); a term no index serves
        reads the newest ``SCAN_MAX`` items only, unless the operator chose to read every item
        (``?scan=all``), and the page says which it did."""
        text = search_term.strip()
        if not text:
            return queryset, False
        try:
            terms = read_terms(text)
        except InvalidPayload as exc:
            self.message_user(request, f"{exc}; nothing was searched.", messages.ERROR)
            return queryset.none(), False
        scan_all = request.GET.get(ScanFilter.parameter_name) == "all"
        found = search(queryset, terms, scan_all=scan_all, org_id=scope_of(request))
        if found.scanned:
            self._say_scanned(request, found.scanned, found.newest)
        return found.queryset, False

    def _say_scanned(self, request: HttpRequest, scanned: list[str], newest: int) -> None:
        terms = ", ".join(scanned)
        if not newest:
            self.message_user(
                request,
                f"The search for {terms}: no index serves this; every item was read (a full scan).",
                messages.WARNING,
            )
            return
        query = request.GET.copy()
        query[ScanFilter.parameter_name] = "all"
        self.message_user(
            request,
            format_html(
                "{}: no index serves this, so only the newest {} items were searched. "
                '<a href="?{}" id="scan-all">Search every item</a> (a full scan of the table: '
                "slow on a busy one), or add an index on the expression "
                "(docs/howto/console.md).",
                terms,
                f"{newest:,}",
                query.urlencode(),
            ),
            messages.WARNING,
        )

    @admin.display(description="id")
    def short_id(self, item: WorkItem) -> str:
        # Time-ordered ids share their first digits; the last ones tell items apart.
        return format_html('<span title="{}">…{}</span>', item.id, str(item.id)[-12:])

    @admin.display(description="tenant")
    def tenant(self, item: WorkItem) -> str:
        return getattr(item, "tenant_name", None) or str(item.org_id)

    @admin.display(description="progress")
    def progress_shown(self, item: WorkItem) -> str:
        return progress_text(item.progress)

    @admin.display(description="attempts")
    def tries(self, item: WorkItem) -> str:
        return f"{item.attempts}/{item.max_attempts}"

    @admin.display(description="worker")
    def worker(self, item: WorkItem) -> str:
        """Who holds it now, or who ran its last attempt."""
        if not item.claimed_by:
            return "-"
        held = item.status == Status.CLAIMED
        return format_html(
            '<span title="{}">{}{}</span>',
            item.claimed_by,
            item.claimed_by[-24:],
            "" if held else " (last)",
        )

    @admin.display(description="last error")
    def error(self, item: WorkItem) -> str:
        return first_line(item.last_error, 80)

    @admin.display(description="workflow")
    def workflow(self, item: WorkItem) -> str:
        return workflow_link(item.workflow_id)

    @admin.display(description="age")
    def age_shown(self, item: WorkItem) -> str:
        """A pending item's wait since it came due; any other's since it was created."""
        if item.status == Status.PENDING and item.available_at <= timezone.now():
            return format_html(
                '<span title="waiting since {}">{} waiting</span>',
                item.available_at,
                age(item.available_at),
            )
        return age(item.created_at)

    @admin.display(description="created")
    def created(self, item: WorkItem) -> str:
        return format_html('<span title="{}">{} ago</span>', item.created_at, age(item.created_at))

    @admin.display(description="finished")
    def finished(self, item: WorkItem) -> str:
        if item.status not in ENDED:
            return "-"
        return format_html('<span title="{}">{} ago</span>', item.updated_at, age(item.updated_at))

    @admin.display(description="created by")
    def author(self, item: WorkItem) -> str:
        return actor_names([item.created_by]).get(item.created_by, item.created_by)

    @admin.display(description="updated by")
    def last_signed_by(self, item: WorkItem) -> str:
        return actor_names([item.updated_by]).get(item.updated_by, item.updated_by)

    @admin.display(description="trace")
    def trace(self, item: WorkItem) -> str:
        return trace_link(item.traceparent)

    # -- the detail page --

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: WorkItem | None = None,
    ) -> HttpResponse:
        """The detail page: payload, result, full error, every attempt (worker, host, start,
        end, outcome, traceback), history from the audit trail, triage."""
        if obj is not None:
            attempts = (
                Attempt.objects.using(admin_alias(request))
                .filter(org_id=obj.org_id, item_id=obj.id)
                .order_by("id")[:ATTEMPTS_SHOWN]
            )
            context.update(
                item=obj,
                attempts=list(attempts),
                payload_json=json.dumps(obj.payload, indent=2, sort_keys=True),
                live=live_state(obj),
                live_url=self.live_url(obj),
                live_poll_s=POLL_S,
                progress_line=progress_text(obj.progress, NOTE_MAX),
                progress_share=share(obj.progress),
                progress_at=(obj.progress or {}).get("at"),
                meta_json=json.dumps(obj.meta, indent=2, sort_keys=True, ensure_ascii=False),
                result_json=_pretty(obj.result),
                history=self._history(request, obj),
                triage=self._triage_for(request, obj),
                workflow=workflow_link(obj.workflow_id),
                **self._holding(request, obj),
                action_checkbox_name=ACTION_CHECKBOX_NAME,
            )
        return super().render_change_form(request, context, add, change, form_url, obj)

    def _holding(self, request: HttpRequest, item: WorkItem) -> dict[str, str]:
        """How many waiting items need the item done, and the workflow they are steps of."""
        if not item.has_dependents:
            return {}
        holding = read_holding([item.id], scope=scope_of(request)).get(item.id)
        if holding is None or not holding.waiting:
            return {}
        held = holding.workflows[0] if holding.workflows else item.workflow_id
        return {"holding": counted(holding.waiting), "held_workflow": workflow_link(held)}

    def _history(self, request: HttpRequest, item: WorkItem) -> list[tuple[AuditEntry, str]]:
        """The item's audit entries, oldest first, each with its actor's name and its data."""
        entries = list(
            AuditEntry.objects.using(admin_alias(request))
            .filter(org_id=item.org_id, subject_type="workqueue.workitem", subject_id=str(item.id))
            .order_by("created_at")[:HISTORY_SHOWN]
        )
        names = actor_names(entry.actor for entry in entries)
        for entry in entries:
            # Read by the template beside the entry's own fields.
            entry.actor_name = names.get(entry.actor, entry.actor)  # type: ignore[attr-defined]
        return [(entry, json.dumps(entry.data, indent=2, sort_keys=True)) for entry in entries]

    def _triage_for(self, request: HttpRequest, item: WorkItem) -> list[TriageAction]:
        """The buttons of the item's page: this list's actions that act on its status and
        that the user may use."""
        return [
            action
            for action in self.actions
            if item.status in action.acts_on
            and getattr(self, f"has_{action.permission}_permission")(request)
        ]
