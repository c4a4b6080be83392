"""The lists' filters (tenant, kind, lane, when a dead letter failed), and the dead-letter
list's filters read as the ``DeadFilter`` its grouping, count and triage by filter act on.

Filters are drawn from the kind registry and the lanes found without a scan (``read_lanes``),
never from ``DISTINCT`` over the table: a list stays fast on a million rows."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from tenancy.admin_fence import admin_alias, sees_every_tenant
from workqueue.admin.scope import scope_of, tenants_have_names
from workqueue.exceptions import InvalidPayload
from workqueue.kinds import known_kinds
from workqueue.lanes import declared_lanes
from workqueue.models import Status
from workqueue.triage import ERROR_CONTAINS_MAX, DeadFilter, parse_since, read_lanes

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
