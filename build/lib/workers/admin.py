"""The queue gauges page in the admin, reached from the admin's index like any list of it (its
entry is a proxy model's), without replacing the site's index."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest, HttpResponse

from tenancy.admin_fence import is_operator, tenant_staff
from workers import dashboard
from workers.models import QueueGauges


@admin.register(QueueGauges)
class QueueGaugesAdmin(admin.ModelAdmin):
    """The site's operator sees every tenant's figures; a tenant's staff their tenant's."""

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return dashboard.gauges(request)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_operator(request) or tenant_staff(request) is not None

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
