"""Work items and dead letters in the admin, with the triage actions.

Who sees which tenant's items, and how, is ``tenancy/admin.py``'s rule: the operator reads
every tenant on the system login; a tenant's staff read theirs under row-level security.

Lists stay fast on a million rows: no full count (``BoundedPaginator``), no facets, no
sortable columns (each would sort the whole table), filters drawn from the kind registry rather
than from ``DISTINCT`` over the table, search by exact id or key, and an order each list's
indexes serve: items newest first by their time-ordered id (the primary key), dead letters by
when they failed (``workitem_triage_idx``).

Every triage action (requeue now, requeue later, discard, edit the payload then requeue,
cancel) shows
a confirmation page first, acts on at most ``MAX_BATCH`` items, runs as one of the store's
triage statements under the items' tenant (``workqueue/triage.py``: fenced on the status and
``updated_at`` the confirmation page drew, audited in the same statement with the operator as
actor), and says which items changed meanwhile and were left alone.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import DateTimeField, ExpressionWrapper, Model, OuterRef, QuerySet, Subquery
from django.db.models.functions import Now
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from audit.models import AuditEntry
from audit.names import actor_names
from tenancy.admin_fence import OperatorWrites, TenantAdmin, admin_alias, is_operator, tenant_staff
from tenancy.contexts import OpContext, actor_of
from tenancy.modes import current_tenancy
from tenancy.services import operator_context
from workqueue import api
from workqueue.cancel import cancel_drawn
from workqueue.claim import forget_caps
from workqueue.kinds import known_kinds
from workqueue.lanes import declared_lanes
from workqueue.models import Attempt, DeadLetter, Pause, Status, TenantShare, WorkItem
from workqueue.pauses import pause, resume
from workqueue.triage import (
    ERROR_CONTAINS_MAX,
    MAX_BATCH,
    SCAN_MAX,
    DeadFilter,
    Drawn,
    Triaged,
    act_on_every_match,
    count_dead,
    discard,
    group_dead,
    parse_since,
    read_lanes,
    requeue_dead,
    requeue_edited,
)
from wqcore.conf import system_alias, wq_settings

# The longest delay the "requeue later" page offers, in minutes (30 days).
MAX_DELAY_MINUTES = 43_200
# How many tenants the tenant filter lists (others are reached by ?org=<id>).
TENANT_CHOICES = 50
# The most attempts an item's page lists (the first ones: an item runs out of attempts long
# before; one an operator requeued many times shows its first this many).
ATTEMPTS_SHOWN = 200


def age(when: datetime | None) -> str:
    """How long ago, in the largest whole unit: 42s, 5m, 3h, 2d."""
    if when is None:
        return "-"
    seconds = max((timezone.now() - when).total_seconds(), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def first_line(text: str, limit: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _orgs() -> bool:
    """Whether the tenants are the tenancy app's orgs (which have names to show)."""
    return current_tenancy().name == "orgs"


# -- filters ------------------------------------------------------------------------------------


class TenantFilter(admin.SimpleListFilter):
    """The operator's tenant filter (a tenant's staff see one tenant: no filter)."""

    title = "tenant"
    parameter_name = "org"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # The orgs tenancy names its tenants; another lists none (filter with ?org=<id>).
        if not _orgs():
            return []
        from tenancy.models import Org

        orgs = Org.objects.using(admin_alias(request)).order_by("name")[:TENANT_CHOICES]
        return [(str(org.pk), org.name) for org in orgs]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if not self.value():
            return queryset
        try:
            return queryset.filter(org_id=uuid.UUID(self.value()))
        except ValueError:
            return queryset.none()


class KindFilter(admin.SimpleListFilter):
    title = "kind"
    parameter_name = "kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(k, k) for k in known_kinds()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(kind=self.value()) if self.value() else queryset


def scope_of(request: HttpRequest) -> uuid.UUID | None:
    """Whose rows a reading of the admin covers: every tenant's for the operator (``None``: on
    the system login), else the staff member's tenant (under its row-level security)."""
    if is_operator(request):
        return None
    staff = tenant_staff(request)
    if staff is None:
        raise PermissionDenied("the queue's admin is for the site's operator and tenant staff")
    return staff.org_id


class LaneFilter(admin.SimpleListFilter):
    """Every lane that holds items (found without a scan: ``read_lanes``), declared or
    not, with the declared ones on the items list; the dead-letter list lists its own lanes."""

    title = "lane"
    parameter_name = "lane"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        dead_only = isinstance(model_admin, DeadLetterAdmin)
        lanes = set(read_lanes(scope_of(request), with_live=not dead_only))
        if not dead_only:
            lanes.update(declared_lanes())
        if self.value():
            lanes.add(self.value())
        return [(lane, lane) for lane in sorted(lanes)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(lane=self.value()) if self.value() else queryset


# The "failed" filter's windows, by when a dead letter failed (its updated_at).
FAILED_WINDOWS = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}


class FailedFilter(admin.SimpleListFilter):
    """When a dead letter failed: the last hour, day or week, or since a given moment
    (``?failed_since=<ISO 8601>``). Read through ``workitem_triage_idx``."""

    title = "failed"
    parameter_name = "failed"
    since_parameter = "failed_since"

    def __init__(self, request: HttpRequest, params: dict[str, Any], *args: Any) -> None:
        given = params.pop(self.since_parameter, None)
        self.since_text = (given[-1] if isinstance(given, list) else given) or None
        super().__init__(request, params, *args)
        if self.since_text is not None:
            self.used_parameters[self.since_parameter] = self.since_text

    def expected_parameters(self) -> list[str]:
        return [self.parameter_name, self.since_parameter]

    def has_output(self) -> bool:
        return True

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        choices = [
            ("hour", "in the last hour"),
            ("day", "in the last day"),
            ("week", "in the last week"),
        ]
        return choices

    def since(self) -> datetime | None:
        return failed_since(self.value(), self.since_text)

    def choices(self, changelist: Any) -> Any:
        yield from super().choices(changelist)
        if self.since_text:
            yield {
                "selected": True,
                "query_string": changelist.get_query_string(remove=[self.parameter_name]),
                "display": f"since {self.since_text}",
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        try:
            since = self.since()
        except api.InvalidPayload as exc:
            raise IncorrectLookupParameters(str(exc)) from None
        return queryset if since is None else queryset.filter(updated_at__gte=since)


def failed_since(window: str | None, since_text: str | None) -> datetime | None:
    """The moment a "failed" choice stands for: an explicit ``failed_since`` (it wins), or now
    less the window; None for neither."""
    if since_text:
        return parse_since(since_text)
    if window in FAILED_WINDOWS:
        return timezone.now() - FAILED_WINDOWS[window]
    if window:
        raise api.InvalidPayload(f"failed: must be one of {', '.join(FAILED_WINDOWS)}")
    return None


def _count_field(request: HttpRequest, name: str) -> int:
    """A count the confirmation page carries (0 when absent or not a count)."""
    text = request.POST.get(name, "")
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else 0


# The query string a dead-letter filter reads (the list's filters and search), and the list's
# own page, order and error markers.
DEAD_FILTER_PARAMETERS = frozenset(
    {"org", "kind", "lane", "failed", "failed_since", "q", "p", "o", "e", "_changelist_filters"}
)


def dead_filter_of(request: HttpRequest, query: Any = None) -> DeadFilter:
    """The dead-letter list's filters (``query``: its query string, else the request's) as the
    ``DeadFilter`` a grouping, a count or a triage by filter reads: the same rows the list
    shows. A tenant's staff name no tenant: their readings are their tenant's anyway."""
    query = request.GET if query is None else query
    unknown = set(query) - DEAD_FILTER_PARAMETERS
    if unknown:
        # A filter this reading does not know would make it match more than the list shows.
        raise api.InvalidPayload(f"{sorted(unknown)[0]}: not a filter of the dead letters")
    org = None
    if is_operator(request) and query.get("org"):
        try:
            org = uuid.UUID(query["org"])
        except ValueError:
            raise api.InvalidPayload("org: must be a tenant's id") from None
    term = (query.get("q") or "").strip()
    try:
        uuid.UUID(term)
    except ValueError:
        pass
    else:
        # The list shows that one item: triage it from its page, not by a filter.
        raise api.InvalidPayload("q: an item's id; triage that item from its own page")
    return DeadFilter(
        kind=query.get("kind") or None,
        lane=query.get("lane") or None,
        error_contains=term[:ERROR_CONTAINS_MAX] if term else None,
        failed_since=failed_since(query.get("failed"), query.get("failed_since")),
        org_id=org,
    ).checked()


# -- triage -------------------------------------------------------------------------------------


class Refused(Exception):
    """A triage request the operator must fix first (shown on the confirmation page)."""


def _actor(request: HttpRequest, org_id: uuid.UUID) -> OpContext:
    """Whom the audit entries name, in the tenant acted on: a tenant's staff act as
    themselves in their tenant; the operator in the tenant of the items."""
    staff = tenant_staff(request)
    if staff is not None and not is_operator(request):
        return staff
    return operator_context(request.rctx, org_id, str(request.user.pk))  # type: ignore[attr-defined]


class TriageAction:
    """One triage action: which statuses it acts on, its page's words, what it does."""

    name = ""
    verb = ""
    acts_on: frozenset[str] = frozenset()

    def extra(self, request: HttpRequest, items: list[WorkItem]) -> dict[str, Any]:
        """The values of the confirmation page's own inputs (for the page, and for ``act``)."""
        return {}

    def act(
        self, request: HttpRequest, ctx: OpContext, fences: list[Drawn], extra: dict[str, Any]
    ) -> Triaged:
        raise NotImplementedError


class RequeueNow(TriageAction):
    name, verb = "requeue_now", "Requeue now"
    acts_on = frozenset({Status.FAILED.value})

    def act(
        self, request: HttpRequest, ctx: OpContext, fences: list[Drawn], extra: dict[str, Any]
    ) -> Triaged:
        return requeue_dead(ctx, fences)


class RequeueLater(TriageAction):
    name, verb = "requeue_later", "Requeue after a delay"
    acts_on = frozenset({Status.FAILED.value})

    def extra(self, request: HttpRequest, items: list[WorkItem]) -> dict[str, Any]:
        raw = request.POST.get("delay_minutes", "60").strip()
        values: dict[str, Any] = {"delay_minutes": raw}
        if request.POST.get("confirm") == "yes":
            whole = raw.isascii() and raw.isdigit() and len(raw) <= 6
            if not whole or not 1 <= int(raw) <= MAX_DELAY_MINUTES:
                raise Refused(
                    f"delay_minutes: must be a whole number of minutes from 1 to "
                    f"{MAX_DELAY_MINUTES} (30 days), got {raw[:20]!r}"
                )
            values["delay_s"] = int(raw) * 60
        return values

    def act(
        self, request: HttpRequest, ctx: OpContext, fences: list[Drawn], extra: dict[str, Any]
    ) -> Triaged:
        return requeue_dead(ctx, fences, delay_s=extra["delay_s"])


class Discard(TriageAction):
    name, verb = "discard", "Discard"
    acts_on = frozenset({Status.FAILED.value, Status.PENDING.value})

    def act(
        self, request: HttpRequest, ctx: OpContext, fences: list[Drawn], extra: dict[str, Any]
    ) -> Triaged:
        return discard(ctx, fences)


class EditPayload(TriageAction):
    name, verb = "edit_payload", "Edit the payload, then requeue"
    acts_on = frozenset({Status.FAILED.value})

    def extra(self, request: HttpRequest, items: list[WorkItem]) -> dict[str, Any]:
        if len(items) != 1:
            raise Refused("items: edit one item at a time (select exactly one)")
        if request.POST.get("confirm") != "yes":
            return {"payload_text": json.dumps(items[0].payload, indent=2, sort_keys=True)}
        text = request.POST.get("payload", "")
        values: dict[str, Any] = {"payload_text": text}
        try:
            values["payload"] = json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:
            raise Refused(f"payload: not valid JSON ({exc})") from None
        return values

    def act(
        self, request: HttpRequest, ctx: OpContext, fences: list[Drawn], extra: dict[str, Any]
    ) -> Triaged:
        (fence,) = fences
        try:
            item = requeue_edited(ctx, fence, extra["payload"])
        except api.Conflict:
            return Triaged([], [fence.id])
        return Triaged([item], [])


class Cancel(TriageAction):
    """A pending item is cancelled at once; a claimed one's holder is asked (it ends the item
    cancelled at its next lease renewal). Fenced like the others, except that a claimed item's
    ``updated_at`` moves at every renewal: its fence is that it is still claimed."""

    name, verb = "cancel", "Cancel"
    acts_on = frozenset({Status.PENDING.value, Status.CLAIMED.value})

    def act(
        self, request: HttpRequest, ctx: OpContext, fences: list[Drawn], extra: dict[str, Any]
    ) -> Triaged:
        return cancel_drawn(ctx, fences)


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


TRIAGE = {a.name: a for a in (RequeueNow(), RequeueLater(), Discard(), EditPayload(), Cancel())}


# The triage actions a "select all" of the dead-letter list hands to its triage by filter.
BY_FILTER = {"requeue_now": "requeue", "discard": "discard"}
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")


def trace_link(traceparent: str | None) -> str:
    """An item's trace id, linked to the tracing UI by ``WORKQUEUE["TRACE_URL_TEMPLATE"]``
    (plain text when that is empty)."""
    match = _TRACEPARENT.match((traceparent or "").strip().lower())
    if match is None:
        return traceparent or "-"
    trace_id = match.group(1)
    template = wq_settings.TRACE_URL_TEMPLATE
    if not template:
        return trace_id
    url = template.replace("{trace_id}", trace_id)
    return format_html('<a href="{}" id="trace-link" rel="noopener">{}</a>', url, trace_id)


# -- the admin ----------------------------------------------------------------------------------


@admin.register(WorkItem)
class WorkItemAdmin(TenantAdmin):
    list_display = (
        "short_id",
        "tenant",
        "kind",
        "lane",
        "status",
        "tries",
        "error",
        "created",
        "updated",
    )
    list_display_links = ("short_id",)
    list_filter = (TenantFilter, KindFilter, LaneFilter, "status")
    search_fields = ("id", "idempotency_key")
    search_help_text = "An item's id, or its idempotency key (exact)."
    # Time-ordered ids (UUIDv7): newest first is the primary key read backwards.
    ordering = ("-id",)
    sortable_by = ()
    list_per_page = 50
    actions = ("requeue_now", "requeue_later", "discard", "edit_payload", "cancel")
    change_form_template = "admin/workqueue/workitem/change_form.html"
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

    # -- who --

    def get_list_filter(self, request: HttpRequest) -> tuple[Any, ...]:
        if is_operator(request):
            return self.list_filter
        return tuple(f for f in self.list_filter if f is not TenantFilter)

    def get_list_display(self, request: HttpRequest) -> tuple[str, ...]:
        if is_operator(request):
            return self.list_display
        return tuple(f for f in self.list_display if f != "tenant")

    def has_triage_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if not _orgs():
            return queryset
        from tenancy.models import Org

        # The org's name for the list, read in the same statement on the same login.
        names = Org.objects.filter(pk=OuterRef("org_id")).values("name")[:1]
        return queryset.annotate(tenant_name=Subquery(names))

    # -- the list --

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            return queryset.filter(pk=uuid.UUID(term)), False
        except ValueError:
            return queryset.filter(idempotency_key=term[:200]), False

    @admin.display(description="id")
    def short_id(self, item: WorkItem) -> str:
        # Time-ordered ids share their first digits; the last ones tell items apart.
        return format_html('<span title="{}">…{}</span>', item.id, str(item.id)[-12:])

    @admin.display(description="tenant")
    def tenant(self, item: WorkItem) -> str:
        return getattr(item, "tenant_name", None) or str(item.org_id)

    @admin.display(description="attempts")
    def tries(self, item: WorkItem) -> str:
        return f"{item.attempts}/{item.max_attempts}"

    @admin.display(description="last error")
    def error(self, item: WorkItem) -> str:
        return first_line(item.last_error, 80)

    @admin.display(description="created")
    def created(self, item: WorkItem) -> str:
        return age(item.created_at)

    @admin.display(description="changed")
    def updated(self, item: WorkItem) -> str:
        return age(item.updated_at)

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
        """The detail page: payload, full error, every attempt (worker, host, start, end,
        outcome, traceback), history from the audit trail, triage."""
        if obj is not None:
            history = (
                AuditEntry.objects.using(admin_alias(request))
                .filter(
                    org_id=obj.org_id, subject_type="workqueue.workitem", subject_id=str(obj.id)
                )
                .order_by("created_at")[:200]
            )
            history = list(history)
            names = actor_names(e.actor for e in history)
            for entry in history:
                entry.actor_name = names.get(entry.actor, entry.actor)  # type: ignore[attr-defined]
            attempts = (
                Attempt.objects.using(admin_alias(request))
                .filter(org_id=obj.org_id, item_id=obj.id)
                .order_by("id")[:ATTEMPTS_SHOWN]
            )
            context.update(
                item=obj,
                attempts=list(attempts),
                payload_json=json.dumps(obj.payload, indent=2, sort_keys=True),
                history=[(e, json.dumps(e.data, indent=2, sort_keys=True)) for e in history],
                triage=[
                    action
                    for action in TRIAGE.values()
                    if obj.status in action.acts_on and self.has_triage_permission(request)
                ],
                action_checkbox_name=admin.helpers.ACTION_CHECKBOX_NAME,
            )
        return super().render_change_form(request, context, add, change, form_url, obj)

    # -- triage actions --

    @admin.action(permissions=["triage"], description="Requeue now (attempts reset)")
    def requeue_now(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        return self.triage(request, queryset, TRIAGE["requeue_now"])

    @admin.action(permissions=["triage"], description="Requeue after a delay")
    def requeue_later(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        return self.triage(request, queryset, TRIAGE["requeue_later"])

    @admin.action(permissions=["triage"], description="Discard (kept in the audit trail)")
    def discard(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        return self.triage(request, queryset, TRIAGE["discard"])

    @admin.action(permissions=["triage"], description="Edit the payload, then requeue")
    def edit_payload(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        return self.triage(request, queryset, TRIAGE["edit_payload"])

    @admin.action(
        permissions=["triage"], description="Cancel (pending now; running: its worker is asked)"
    )
    def cancel(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        return self.triage(request, queryset, TRIAGE["cancel"])

    def triage(
        self, request: HttpRequest, queryset: QuerySet[Any], action: TriageAction
    ) -> HttpResponse | None:
        """Show the confirmation page; on its confirmation, act on what it drew. Every dead
        letter of the list ("select all"): the triage by filter of what the list shows."""
        by_filter = BY_FILTER.get(action.name)
        if (
            request.POST.get("select_across") == "1"
            and by_filter is not None
            and isinstance(self, DeadLetterAdmin)
        ):
            url = reverse("admin:workqueue_deadletter_matching", args=[by_filter])
            return HttpResponseRedirect(f"{url}?{request.GET.urlencode()}")
        selected = list(queryset.order_by("-id")[: MAX_BATCH + 1])
        if len(selected) > MAX_BATCH:
            self.message_user(
                request,
                f"Select at most {MAX_BATCH} items at a time; nothing was changed.",
                messages.ERROR,
            )
            return None
        eligible = [item for item in selected if item.status in action.acts_on]
        skipped = [item for item in selected if item.status not in action.acts_on]
        confirming = request.POST.get("confirm") == "yes"
        if not eligible:
            if confirming:
                # Everything the page drew has changed since (or left this list): say so.
                try:
                    return self._act(request, [], action, {})
                except Refused as exc:
                    self.message_user(request, f"{exc}; nothing was changed.", messages.ERROR)
                    return None
            wanted = " or ".join(sorted(action.acts_on))
            self.message_user(
                request,
                f"{action.verb}: none of the selected items is {wanted}; nothing was changed.",
                messages.WARNING,
            )
            return None
        problem = None
        try:
            extra = action.extra(request, eligible)
        except Refused as exc:
            problem = str(exc)
            extra = {
                "payload_text": request.POST.get("payload", ""),
                "delay_minutes": request.POST.get("delay_minutes", ""),
            }
            if not confirming:  # nothing to correct on a page not drawn yet
                self.message_user(request, f"{problem}; nothing was changed.", messages.ERROR)
                return None
        if confirming and problem is None:
            try:
                return self._act(request, eligible, action, extra)
            except (Refused, api.InvalidPayload) as exc:
                problem = str(exc)
        return self._confirmation(request, action, eligible, skipped, extra, problem)

    def _act(
        self,
        request: HttpRequest,
        items: list[WorkItem],
        action: TriageAction,
        extra: dict[str, Any],
    ) -> HttpResponse | None:
        """Act on the fences the confirmation page drew, per tenant, in one transaction."""
        drawn = []
        for token in request.POST.getlist("fence"):
            try:
                drawn.append(Drawn.parse(token))
            except api.InvalidPayload as exc:
                raise Refused(str(exc)) from None
        org_of = {item.id: item.org_id for item in items}
        by_org: dict[uuid.UUID, list[Drawn]] = defaultdict(list)
        gone = []
        for fence in drawn:
            if fence.id in org_of:
                by_org[org_of[fence.id]].append(fence)
            else:
                gone.append(fence.id)
        if not drawn:
            raise Refused("fence: the page drew no items; go back to the list")
        changed: list[WorkItem] = []
        refused: list[uuid.UUID] = list(gone)
        with transaction.atomic(using="default"):
            for org_id, fences in by_org.items():
                result = action.act(request, _actor(request, org_id), fences, extra)
                changed += result.changed
                refused += result.refused
        if changed:
            self.message_user(
                request, f"{action.verb}: done for {len(changed)} item(s).", messages.SUCCESS
            )
        if refused:
            self.message_user(
                request,
                f"{len(refused)} item(s) changed since the page was drawn and were left as "
                f"they are (reload to see them now): {', '.join(map(str, refused[:10]))}"
                + (" …" if len(refused) > 10 else ""),
                messages.WARNING,
            )
        return None

    def _confirmation(
        self,
        request: HttpRequest,
        action: TriageAction,
        items: list[WorkItem],
        skipped: list[WorkItem],
        extra: dict[str, Any],
        problem: str | None,
    ) -> TemplateResponse:
        # On a second drawing (a correction), keep the fences of the first: what the operator
        # confirmed against is what they saw first.
        first = {}
        for token in request.POST.getlist("fence"):
            try:
                fence = Drawn.parse(token)
            except api.InvalidPayload:
                continue
            first[fence.id] = fence.token()
        context = {
            **self.admin_site.each_context(request),
            "title": f"{action.verb}: confirm",
            "opts": self.opts,
            "action": action,
            "items": [(item, first.get(item.id) or Drawn.of(item).token()) for item in items],
            "skipped": skipped,
            "extra": extra,
            "problem": problem,
            "max_delay_minutes": MAX_DELAY_MINUTES,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
            "operator": is_operator(request),
        }
        return TemplateResponse(
            request, "admin/workqueue/triage_confirmation.html", context, status=200
        )


@admin.register(DeadLetter)
class DeadLetterAdmin(WorkItemAdmin):
    """Failed items, most recently failed first (``workitem_triage_idx``); filtered by when
    they failed, searched by error text (within a window: ``dead_filter_of``), grouped by kind
    and error (``groups/``), and triaged by filter (``matching/<action>/``): every dead letter
    the list's filters match, server-side, in bounded batches."""

    list_display = ("short_id", "tenant", "kind", "lane", "tries", "error", "failed", "created")
    list_filter = (TenantFilter, KindFilter, LaneFilter, FailedFilter)
    ordering = ("-updated_at",)
    # A dead letter is final: nothing to cancel.
    actions = ("requeue_now", "requeue_later", "discard", "edit_payload")
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
            window = timedelta(seconds=float(wq_settings.TRIAGE_SEARCH_WINDOW_S))
            floor = ExpressionWrapper(Now() - window, output_field=DateTimeField())
            found = found.filter(updated_at__gte=floor)
        return found, False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> Any:
        query = request.GET.copy()
        for ignored in ("p", "o", "e", "_changelist_filters"):
            query.pop(ignored, None)
        extra = {"filter_query": query.urlencode(), **(extra_context or {})}
        return super().changelist_view(request, extra)

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
            *super().get_urls(),
        ]

    def _filter_or_refuse(self, request: HttpRequest) -> DeadFilter | None:
        try:
            return dead_filter_of(request)
        except api.InvalidPayload as exc:
            self.message_user(request, f"{exc}; nothing was changed.", messages.ERROR)
            return None

    def groups_view(self, request: HttpRequest) -> HttpResponse:
        """The dead letters the list's filters match, grouped by kind and their error's first
        line, most first: how many, first and last failed; each group one click to its items."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        dead = self._filter_or_refuse(request)
        if dead is None:
            return HttpResponseRedirect(reverse("admin:workqueue_deadletter_changelist"))
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
        }
        return TemplateResponse(request, "admin/workqueue/deadletter/groups.html", context)

    def matching_view(self, request: HttpRequest, action: str) -> HttpResponse:
        """Requeue or discard every dead letter the list's filters match: a confirmation page
        (how many, as of the database's now()), then, on its confirmation, the triage by filter
        fenced on that moment, in bounded batches; a page to resume when a run stops at its
        budget (``TRIAGE_MAX_BATCHES``)."""
        if not self.has_triage_permission(request):
            raise PermissionDenied
        if action not in ("requeue", "discard"):
            raise PermissionDenied("action: requeue or discard")
        changelist = reverse("admin:workqueue_deadletter_changelist")
        dead = self._filter_or_refuse(request)
        if dead is None:
            return HttpResponseRedirect(changelist)
        scope = scope_of(request)
        verb = {"requeue": "Requeue", "discard": "Discard"}[action]
        done_so_far = 0
        if request.method == "POST" and request.POST.get("confirm") == "yes":
            try:
                until = parse_since(request.POST.get("until", ""), "until")
            except api.InvalidPayload as exc:
                self.message_user(request, f"{exc}; nothing was changed.", messages.ERROR)
                return HttpResponseRedirect(changelist)
            swept = act_on_every_match(
                action, dead, until, lambda org_id: _actor(request, org_id), scope
            )
            done_so_far = _count_field(request, "done_so_far") + swept.changed
            # What the page counted, less what changed: the items changed meanwhile (requeued,
            # retried, failed again or purged since the moment confirmed), left as they are.
            left_alone = max(_count_field(request, "shown") - done_so_far, swept.left_alone)
            if swept.done and left_alone:
                self.message_user(
                    request,
                    f"{left_alone} item(s) changed since you confirmed and were left as they are.",
                    messages.WARNING,
                )
            if swept.done:
                self.message_user(
                    request,
                    f"{verb} by filter: done for {done_so_far} item(s).",
                    messages.SUCCESS,
                )
                back = request.GET.copy()
                if scope is not None:
                    back.pop("org", None)  # not a filter of a tenant's staff's list
                return HttpResponseRedirect(f"{changelist}?{back.urlencode()}")
            counted = count_dead(dead, scope, until)
        else:
            counted = count_dead(dead, scope)
            until = counted.read_at
        # The form posts the filter as shown: a window ("the last hour") as the moment it
        # stood for, so the run acts on the rows this page counted.
        frozen = request.GET.copy()
        if dead.failed_since is not None:
            frozen.pop("failed", None)
            frozen[FailedFilter.since_parameter] = dead.failed_since.isoformat()
        shown = _count_field(request, "shown") if done_so_far else counted.items
        context = {
            **self.admin_site.each_context(request),
            "title": f"{verb} every dead letter this filter matches: confirm",
            "shown": shown,
            "frozen_query": frozen.urlencode(),
            "opts": self.opts,
            "action": action,
            "verb": verb,
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

    @admin.display(description="failed")
    def failed(self, item: WorkItem) -> str:
        return format_html('<span title="{}">{} ago</span>', item.updated_at, age(item.updated_at))


class TenantShareForm(forms.ModelForm):
    class Meta:
        model = TenantShare
        fields = ("org_id", "weight", "max_in_flight")
        labels = {"org_id": "tenant"}
        help_texts = {
            "org_id": "The tenant's id (with the orgs tenancy: choose its org).",
            "weight": "The tenant's share of each lane's work while others wait too: a tenant "
            "of weight 2 gets twice the items of one of weight 1 (0.01 to 1000).",
            "max_in_flight": "The most of its items a lane runs at once, across every worker; "
            "empty: the default (WORKQUEUE['MAX_IN_FLIGHT']), or no cap when that is unset.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if _orgs():
            from tenancy.models import Org

            orgs = Org.objects.using(system_alias()).order_by("name").values_list("id", "name")
            self.fields["org_id"] = forms.TypedChoiceField(
                label="tenant", choices=list(orgs), coerce=uuid.UUID
            )


@admin.register(TenantShare)
class TenantShareAdmin(OperatorWrites, TenantAdmin):
    """A tenant's share of the fair claim: set by the operator, read by the tenant's staff.
    Workers read a new cap within ``workqueue.claim.CAPS_CACHE_S`` seconds."""

    form = TenantShareForm
    list_display = ("tenant", "weight", "cap", "updated_at")
    ordering = ("-weight",)
    readonly_fields = ("updated_at",)

    @admin.display(description="tenant")
    def tenant(self, share: TenantShare) -> str:
        return current_tenancy().tenant_names([share.org_id]).get(share.org_id) or str(share.org_id)

    @admin.display(description="cap in flight")
    def cap(self, share: TenantShare) -> str:
        if share.max_in_flight is not None:
            return str(share.max_in_flight)
        default = wq_settings.MAX_IN_FLIGHT
        return f"default ({default})" if default is not None else "none"

    def save_model(self, request: HttpRequest, obj: Model, form: Any, change: bool) -> None:
        obj.updated_at = timezone.now()
        super().save_model(request, obj, form, change)
        forget_caps()  # this process reads caps afresh; others within CAPS_CACHE_S


class PauseForm(forms.ModelForm):
    """Pause a declared lane, or one registered kind in it."""

    lane = forms.ChoiceField(help_text="Workers claim none of this lane's items until resumed.")
    kind = forms.ChoiceField(
        required=False,
        help_text="Only this kind in the lane; empty: the whole lane. Running items finish.",
    )

    class Meta:
        model = Pause
        fields = ("lane", "kind", "reason")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["lane"].choices = [(lane, lane) for lane in declared_lanes()]
        self.fields["kind"].choices = [("", "(the whole lane)")] + [(k, k) for k in known_kinds()]

    def validate_unique(self) -> None:
        # Checked by the pause itself (on the system login): a lane paused already stays as
        # its first pause made it, and the operator is told so.
        pass

    def validate_constraints(self) -> None:
        pass  # the same: the pause statement's ON CONFLICT


@admin.register(Pause)
class PauseAdmin(admin.ModelAdmin):
    """Paused lanes and kinds: the operator's only (a pause stops every tenant's work). Adding
    one pauses (``pause``), the "resume" action resumes (``resume``, which wakes the
    lane's workers); both audited with the operator as actor. No edits and no deletes: a pause
    ends by resuming."""

    form = PauseForm
    list_display = ("target", "paused_by", "reason", "paused_at")
    ordering = ("lane", "kind")
    actions = ["resume_selected"]

    @admin.display(description="paused")
    def target(self, pause: Pause) -> str:
        return str(pause)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).using(system_alias())

    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_operator(request)

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return is_operator(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return is_operator(request)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Model, form: Any, change: bool) -> None:
        if not isinstance(obj, Pause) or not is_operator(request):
            raise PermissionDenied
        rctx = getattr(request, "rctx", None)
        paused, changed = pause(
            actor_of(request.user),
            obj.lane,
            obj.kind or None,
            reason=obj.reason,
            request_id=rctx.request_id if rctx is not None else None,
        )
        # The admin's own message and redirect name the pause as it stands.
        found = Pause.objects.using(system_alias()).get(lane=paused.lane, kind=paused.kind)
        obj.pk, obj.paused_by, obj.paused_at = found.pk, found.paused_by, found.paused_at
        if not changed:
            messages.warning(request, f"{paused.target} was already paused by {paused.paused_by}.")

    @admin.action(description="Resume the selected lanes and kinds (wakes their workers)")
    def resume_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        if not is_operator(request):
            return
        rctx = getattr(request, "rctx", None)
        resumed = [
            ended.target
            for pause in queryset
            if (
                ended := resume(
                    actor_of(request.user),
                    pause.lane,
                    pause.kind or None,
                    request_id=rctx.request_id if rctx is not None else None,
                )
            )
            is not None
        ]
        self.message_user(request, f"resumed: {', '.join(resumed) or 'nothing'}")
