"""The lists' filters (tenant, kind, lane, when a dead letter failed; on the items list, when
an item was created or finished, its order, and how far a search reads), the items list's saved
filters, and the dead-letter list's filters read as the ``DeadFilter`` its grouping, count and
triage by filter act on.

Filters are drawn from the kind registry and the lanes found without a scan (``read_lanes``),
never from ``DISTINCT`` over the table: a list stays fast on a million rows."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html

from tenancy.admin_fence import admin_alias, sees_every_tenant
from workqueue.admin.scope import scope_of, tenants_have_names
from workqueue.exceptions import InvalidPayload
from workqueue.kinds import known_kinds
from workqueue.lanes import declared_lanes
from workqueue.models import Status
from workqueue.triage import ERROR_CONTAINS_MAX, SCAN_MAX, DeadFilter, parse_since, read_lanes

# How many tenants the tenant filter lists (others are reached by ?org=<id>).
TENANT_CHOICES = 50
# The "failed" filter's windows, by when a dead letter failed (its updated_at).
FAILED_WINDOWS = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}
# The query string a dead-letter filter reads (the list's filters and search), and the list's
# own page, order and error markers.
DEAD_FILTER_PARAMETERS = frozenset(
    {"org", "kind", "lane", "failed", "failed_since", "q", "p", "o", "e", "_changelist_filters"}
)


class TenantFilter(admin.SimpleListFilter):
    """The operator's tenant filter (a tenant's staff see one tenant: no filter)."""

    title = "tenant"
    parameter_name = "org"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # The orgs tenancy names its tenants; another lists none (filter with ?org=<id>).
        if not tenants_have_names():
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


class LaneFilter(admin.SimpleListFilter):
    """Every lane that holds items (found without a scan: ``read_lanes``), declared or
    not, with the declared ones on the items list; the dead-letter list lists its own lanes."""

    title = "lane"
    parameter_name = "lane"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        dead_only = model_admin.statuses == {Status.FAILED.value}
        lanes = set(read_lanes(scope_of(request), with_live=not dead_only))
        if not dead_only:
            lanes.update(declared_lanes())
        chosen = self.value()
        if chosen:
            lanes.add(chosen)
        return [(lane, lane) for lane in sorted(lanes)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(lane=self.value()) if self.value() else queryset


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

    def expected_parameters(self) -> list[str | None]:
        return [self.parameter_name, self.since_parameter]

    def has_output(self) -> bool:
        return True

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(window, f"in the last {window}") for window in FAILED_WINDOWS]

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
            since = failed_since(self.value(), self.since_text)
        except InvalidPayload as exc:
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
        raise InvalidPayload(f"failed: must be one of {', '.join(FAILED_WINDOWS)}")
    return None


def dead_filter_of(request: HttpRequest) -> DeadFilter:
    """The dead-letter list's filters (its query string) as the ``DeadFilter`` a grouping, a
    count or a triage by filter reads: the same rows the list shows. A tenant's staff name no
    tenant: their readings are their tenant's anyway."""
    query = request.GET
    unknown = set(query) - DEAD_FILTER_PARAMETERS
    if unknown:
        # A filter this reading does not know would make it match more than the list shows.
        raise InvalidPayload(f"{sorted(unknown)[0]}: not a filter of the dead letters")
    org = None
    if sees_every_tenant(request) and query.get("org"):
        try:
            org = uuid.UUID(query["org"])
        except ValueError:
            raise InvalidPayload("org: must be a tenant's id") from None
    term = (query.get("q") or "").strip()
    try:
        uuid.UUID(term)
    except ValueError:
        pass
    else:
        # The list shows that one item: triage it from its page, not by a filter.
        raise InvalidPayload("q: an item's id; triage that item from its own page")
    return DeadFilter(
        kind=query.get("kind") or None,
        lane=query.get("lane") or None,
        error_contains=term[:ERROR_CONTAINS_MAX] if term else None,
        failed_since=failed_since(query.get("failed"), query.get("failed_since")),
        org_id=org,
    ).checked()


# The "created" and "finished" filters' windows ("today": since midnight UTC).
WINDOWS = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}


def window_start(window: str) -> datetime:
    if window == "today":
        return timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    return timezone.now() - WINDOWS[window]


class _WindowFilter(admin.SimpleListFilter):
    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("today", "today"), *((w, f"in the last {w}") for w in WINDOWS)]

    def since(self) -> datetime | None:
        value = self.value()
        if not value:
            return None
        if value != "today" and value not in WINDOWS:
            raise IncorrectLookupParameters(
                f"{self.parameter_name}: must be today, hour, day or week"
            )
        return window_start(value)


class CreatedFilter(_WindowFilter):
    """When an item was created, read as a range of its time-ordered id (the primary key)."""

    title = "created"
    parameter_name = "created"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        from workqueue.admin.search import ids_from

        since = self.since()
        if since is None:
            return queryset
        return queryset.filter(id__gte=ids_from(since), created_at__gte=since)


class FinishedFilter(_WindowFilter):
    """When an item ended (done, failed, discarded, cancelled), through the indexes of ended
    items by when they ended."""

    title = "finished"
    parameter_name = "finished"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        from workqueue.admin.search import finished_since

        since = self.since()
        return queryset if since is None else finished_since(queryset, since)


# The items list's orders: what each shows first, and the rows it reads. Oldest waiting: the
# due pending items as the ready ring holds them (a row per pending item: never the done items
# the hot table and history hold), longest waiting first; most attempts: the items not done
# with the most attempts spent, among the newest SCAN_MAX unless the operator reads every item.
ORDERS = {
    "waiting": ("oldest waiting", ("available_at", "id")),
    "attempts": ("most attempts", ("-attempts", "-id")),
}
# The most ring rows the oldest-waiting order reads: the list's pages and its count's cap.
RING_READ = 10_001


class OrderFilter(admin.SimpleListFilter):
    """The items list's order (the list is otherwise newest first): a filter, so its choice
    stays in every link of the list; it keeps the rows that order is about."""

    title = "order"
    parameter_name = "sort"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(name, label) for name, (label, _) in ORDERS.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "waiting":
            return _longest_waiting(request, queryset)
        if self.value() == "attempts":
            return _most_attempts(request, queryset)
        if self.value():
            raise IncorrectLookupParameters(f"sort: must be one of {', '.join(ORDERS)}")
        return queryset


def _longest_waiting(request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
    """The due pending items the ready ring holds, the ``RING_READ`` longest waiting (in the
    list's lane and kind), each still pending (a ring row is where to look, never the truth).
    Their ids are one array (``= ANY``), so each item is read by its key: an ``IN`` over the
    ring's rows is planned as a hash join over a scan of the whole item table. An item made
    pending without a ring row (a release before the ring) is listed once the ring's rotation
    gives it one, within seconds."""
    now = timezone.now()
    where: list[str] = ["r.available_at <= %s::timestamptz"]
    params: list[Any] = [now]
    for parameter in ("lane", "kind"):
        if request.GET.get(parameter):
            where.append(f"r.{parameter} = %s")
            params.append(request.GET[parameter])
    longest = RawSQL(
        '"workqueue_workitem"."id" = ANY((SELECT array_agg(w.id) FROM ('
        f"SELECT r.id FROM workqueue_ready r WHERE {' AND '.join(where)}"
        " ORDER BY r.available_at LIMIT %s) AS w)::uuid[])",
        (*params, RING_READ),
        output_field=BooleanField(),
    )
    return queryset.filter(longest, status=Status.PENDING, available_at__lte=now)


def _most_attempts(request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
    """The items not done (the hot table's: history holds done items only), among the newest
    ``SCAN_MAX`` unless the operator chose to read every item, which the page says."""
    from django.contrib import messages

    from workqueue.admin.search import newest_floor

    found = queryset.filter(status__in=[s for s in Status.values if s != Status.DONE])
    if request.GET.get(ScanFilter.parameter_name) == "all":
        return found
    query = request.GET.copy()
    query[ScanFilter.parameter_name] = "all"
    messages.info(
        request,
        format_html(
            'Most attempts among the newest {} items. <a href="?{}" id="scan-all">Order every '
            "item</a> (a scan of the table: slow on a busy one).",
            f"{SCAN_MAX:,}",
            query.urlencode(),
        ),
    )
    return found.filter(id__gte=newest_floor())


def order_of(request: HttpRequest) -> tuple[str, ...] | None:
    """The order the list's ``sort`` names (None: the default, newest first)."""
    chosen = ORDERS.get(request.GET.get(OrderFilter.parameter_name) or "")
    return chosen[1] if chosen else None


class ScanFilter(admin.SimpleListFilter):
    """How far a search no index serves reads: the newest ``SCAN_MAX`` items (the default), or
    every item, which the operator chooses knowingly (a scan of the whole table)."""

    title = "search reads"
    parameter_name = "scan"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("all", "every item (a full scan)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() not in (None, "all"):
            raise IncorrectLookupParameters("scan: must be all")
        return queryset


# The items list's saved filters: a name, and the query string it stands for.
SAVED_FILTERS = (
    ("oldest waiting", "sort=waiting"),
    ("most attempts", "sort=attempts"),
    ("running now", "status__exact=claimed"),
    ("failed today", "status__exact=failed&finished=today"),
    ("created in the last hour", "created=hour"),
)
