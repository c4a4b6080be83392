"""The audit trail in the admin: read-only, each tenant's entries to its staff, every tenant's
to the operator (tenancy/admin.py says who sees what, and how)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest

from audit.models import AuditEntry
from audit.names import actor_names
from tenancy.admin_fence import TenantAdmin

# The actions the product appends (a filter over a fixed list: DISTINCT over the whole trail
# would read every entry to draw the sidebar).
KNOWN_ACTIONS = (
    "work.dead_lettered",
    "work.requeued",
    "work.requeued_edited",
    "work.discarded",
)


class ActionFilter(admin.SimpleListFilter):
    title = "action"
    parameter_name = "action"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(a, a) for a in KNOWN_ACTIONS]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(action=self.value()) if self.value() else queryset


class NamedActors(ChangeList):
    """The list's page of entries, each actor named (one read of the users for the page)."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        names = actor_names(entry.actor for entry in self.result_list)
        for entry in self.result_list:
            entry.actor_name = names.get(entry.actor, entry.actor)


@admin.register(AuditEntry)
class AuditEntryAdmin(TenantAdmin[AuditEntry]):
    list_display = ("created_at", "action", "subject", "who", "org_id")
    list_filter = (ActionFilter,)
    search_fields = ("subject_id",)
    search_help_text = "A subject's id (a work item's id), or an actor's user id: exact."
    ordering = ("-created_at",)
    sortable_by = ()
    fields = (
        "created_at",
        "org_id",
        "action",
        "subject_type",
        "subject_id",
        "actor",
        "actor_by_name",
        "request_id",
        "data",
    )
    readonly_fields = ("actor_by_name",)
    # A tenant's staff see one tenant, a single-tenant site has one: its id then says nothing.
    tenant_columns = ("org_id",)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return NamedActors

    @admin.display(description="actor")
    def who(self, entry: AuditEntry) -> str:
        return getattr(entry, "actor_name", entry.actor)

    @admin.display(description="actor's name")
    def actor_by_name(self, entry: AuditEntry) -> str:
        return actor_names([entry.actor]).get(entry.actor, entry.actor)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        term = search_term.strip()[:100]
        if not term:
            return queryset, False
        return queryset.filter(subject_id=term) | queryset.filter(actor=term), False

    @admin.display(description="subject")
    def subject(self, entry: AuditEntry) -> str:
        return f"{entry.subject_type}:{entry.subject_id}"
