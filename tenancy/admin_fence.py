"""The admin's fence: who sees which tenant's rows in the admin, and how.

Two kinds of people use the admin:

- the site's operator (a superuser) sees every tenant. Their reads across tenants go through
  the system login, explicitly (``.using("system")`` on every queryset here), never by turning
  row-level security off;
- a tenant's staff (``is_staff`` and an owner or admin membership) sees that tenant only. Their
  pages read on the everyday login inside their tenant's scope (the tenancy middleware runs the
  view there), so row-level security does the fencing: no filter of ours stands between them
  and another tenant's rows, and another tenant's URL is a 404 like an id that never existed.

Two more read as one of these (``tenancy.roles``, ``tenancy.support``): a *viewer* (staff in
the read-only group) reads every tenant as the operator does and acts on nothing; and in a
*support view* the operator or a viewer is, for the admin, that tenant's staff (the request's
context is theirs in the tenant, every query under its row-level security).

Everyone else sees none of these pages. ``AdminRights`` says who may do what on each page, in
one place. ``TenantAdmin`` is the base of every tenant table's
admin; ``BoundedPaginator`` keeps lists of a million rows from counting them all. (On a site
whose system login is the everyday one, without BYPASSRLS, the tenancy middleware runs the
operator's admin pages in a system scope: ``tenancy.middleware``.)
"""

from __future__ import annotations

import uuid
from functools import cached_property
from typing import Any, ClassVar, TypeVar, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest, HttpResponse

from tenancy.contexts import OpContext, Role
from tenancy.modes import has_tenants
from tenancy.roles import is_read_only
from wqcore.conf import system_alias, tenant_alias
from wqcore.generics import ModelAdmin, Paginator

# The model a tenant table's admin shows.
_M = TypeVar("_M", bound=Model)

# The roles whose staff may use the admin for their tenant.
STAFF_ROLES = frozenset({Role.OWNER, Role.ADMIN})


def support_tenant(request: HttpRequest) -> uuid.UUID | None:
    """The tenant a support view shows this request (``tenancy.support``; set by the tenancy
    middleware), else None."""
    found: uuid.UUID | None = getattr(request, "support_org_id", None)
    return found


def is_operator(request: HttpRequest) -> bool:
    """Whether the signed-in user runs the whole site (a superuser) and reads it whole now
    (not in a support view): every tenant is theirs."""
    user = getattr(request, "user", None)
    return bool(user and user.is_active and user.is_superuser) and support_tenant(request) is None


def is_viewer(request: HttpRequest) -> bool:
    """Whether the signed-in user is a viewer reading every tenant (not in a support view)."""
    return is_read_only(getattr(request, "user", None)) and support_tenant(request) is None


def sees_every_tenant(request: HttpRequest) -> bool:
    """Whether the admin reads every tenant for this user (the operator, a viewer)."""
    return is_operator(request) or is_viewer(request)


def tenant_staff(request: HttpRequest) -> OpContext | None:
    """The context of a staff user acting for their tenant (owner or admin role), or for the
    tenant of their support view, else None (a viewer outside a support view reads every
    tenant instead, whatever their memberships)."""
    user = getattr(request, "user", None)
    op: OpContext | None = getattr(request, "op", None)
    if not (user and user.is_active and user.is_staff and op is not None):
        return None
    if op.role not in STAFF_ROLES or is_viewer(request):
        return None
    return op


def may_act(request: HttpRequest) -> bool:
    """Whether the user may act in the queue's admin (triage, cancel): the operator, a
    tenant's staff; never a viewer, in a support view or not."""
    if is_read_only(getattr(request, "user", None)):
        return False
    return is_operator(request) or tenant_staff(request) is not None


def may_view(request: HttpRequest, tenant_staff_too: bool = True) -> bool:
    """Whether the user reads the queue's admin pages: the operator, a viewer, and (unless
    ``tenant_staff_too`` is False: the operator's own pages) a tenant's staff."""
    return sees_every_tenant(request) or (tenant_staff_too and tenant_staff(request) is not None)


def shows_tenants(request: HttpRequest) -> bool:
    """Whether a list names each row's tenant (a column, a filter): for the operator of a site
    with tenants. A tenant's staff see one tenant, a single-tenant site has one: a tenant on
    every row would say nothing."""
    return sees_every_tenant(request) and has_tenants()


def admin_alias(request: HttpRequest) -> str:
    """Where the admin reads for this user: the system login for the operator (every tenant,
    explicitly), the everyday login under the tenant's row-level security for its staff."""
    return system_alias() if sees_every_tenant(request) else tenant_alias()


class BoundedPaginator(Paginator[Model]):
    """Counts at most ``cap`` + 1 rows: a list of a million rows pays for ten thousand, and
    says "more than 10,000" (``capped``). Pages past the cap are reached by filtering."""

    cap = 10_000

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if isinstance(queryset, QuerySet):
            # Only the ids, no order, no annotations: the cheapest rows to count.
            return queryset.order_by().values("pk")[: self.cap + 1].count()
        return min(len(queryset), self.cap + 1)

    @property
    def capped(self) -> bool:
        return self.count > self.cap


class AdminRights:
    """Who may do what on a page of the queue's admin, for every admin of it (a mixin before
    Django's ``ModelAdmin``): the operator, a viewer and (unless ``tenant_staff_see`` is False)
    a tenant's staff see it; only the operator adds or changes rows, where the page says so;
    nobody deletes. A viewer sees every such page and none of its forms."""

    # Whether a tenant's staff see the page (their tenant's rows): False for the site's own.
    tenant_staff_see: ClassVar[bool] = True
    # Whether the operator adds rows here, and changes them.
    operator_adds: ClassVar[bool] = False
    operator_changes: ClassVar[bool] = False

    def has_module_permission(self, request: HttpRequest) -> bool:
        return may_view(request, self.tenant_staff_see)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.operator_adds and is_operator(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.operator_changes and is_operator(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_actions(self, request: HttpRequest, action_location: Any = None) -> Any:
        # A viewer is offered none (the middleware refuses their posts anyway). Django 6.1
        # passes where the actions are shown; 5.2 does not.
        if is_read_only(getattr(request, "user", None)):
            return {}
        if action_location is None:
            return super().get_actions(request)  # type: ignore[misc]
        return super().get_actions(request, action_location)  # type: ignore[misc]


class TenantAdmin(AdminRights, ModelAdmin[_M]):
    """Base of the admin of a tenant table: read-only; the operator reads every tenant on the
    system login, a tenant's staff their tenant under row-level security."""

    paginator = BoundedPaginator
    show_full_result_count = False
    # No joins: the admin would join every foreign key in a list (the user table among them,
    # which the everyday login may not read); related rows are read apart where needed.
    list_select_related = ()
    show_facets = admin.ShowFacets.NEVER

    # The list's columns and the row's fields that only name its tenant ("tenant", "org_id"):
    # a list shows them where ``shows_tenants``, a row's page where the site has tenants.
    tenant_columns: tuple[str, ...] = ()

    def get_queryset(self, request: HttpRequest) -> QuerySet[_M]:
        return super().get_queryset(request).using(admin_alias(request))

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = super().get_list_display(request)
        if shows_tenants(request):
            return shown
        return tuple(f for f in shown if f not in self.tenant_columns)

    def get_fieldsets(self, request: HttpRequest, obj: _M | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if has_tenants() or not self.tenant_columns:
            return fieldsets
        return [
            (name, {**opts, "fields": [f for f in opts["fields"] if f not in self.tenant_columns]})
            for name, opts in fieldsets
        ]

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> _M:
        """The row, or 404: a row of another tenant is as absent as one that never was (the
        admin's default would redirect with a message instead)."""
        obj = super().get_object(request, object_id, from_field)
        if obj is None:
            raise Http404(f"no {self.opts.verbose_name} with that id")
        return obj

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """Only the list's own filters: Django would take any field lookup from the query
        string (``?payload__n=1``), and each is a scan of the table the indexes cannot serve."""
        allowed = set()
        for spec in self.get_list_filter(request):
            if isinstance(spec, str):
                allowed |= {spec, f"{spec}__exact"}
            elif isinstance(spec, type) and issubclass(spec, admin.SimpleListFilter):
                # Django refuses a filter without one before any request comes.
                if spec.parameter_name is not None:
                    allowed.add(spec.parameter_name)
        return lookup in allowed

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        """An action on the selected rows. A selected value that is no id of this table (a
        tampered post) is refused by name with nothing done: Django would put it in the
        query, which raises (a server error) before any row is read. (Whatever else Django
        passes, 6.1's ``action_location`` among it, goes on to Django's.)"""
        field = ACTION_CHECKBOX_NAME
        for value in request.POST.getlist(field):
            try:
                self.opts.pk.to_python(value)
            except ValidationError:
                self.message_user(
                    request,
                    f"{field}: {value[:60]!r} is not an id of this list; nothing was changed.",
                    messages.ERROR,
                )
                return None
        return super().response_action(request, queryset, *args, **kwargs)


class OperatorWrites(TenantAdmin[_M]):
    """A tenant table the operator writes to (orgs, memberships, tenants' shares): on the
    system login (these tables are read-only to the everyday login), validated there too."""

    operator_adds = True
    operator_changes = True

    def get_form(
        self, request: HttpRequest, obj: _M | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm[_M]]:
        form = super().get_form(request, obj, change, **kwargs)

        def __init__(self: forms.ModelForm[_M], *args: Any, **kw: Any) -> None:
            form.__init__(self, *args, **kw)
            # Constraint checks ask the router where the instance lives.
            self.instance._state.db = system_alias()

        # The admin's form, on the system login: type() makes the subclass, as a class
        # statement cannot take a base the checker knows only as a value.
        on_system_login = type(f"{form.__name__}OnSystemLogin", (form,), {"__init__": __init__})
        return cast("type[forms.ModelForm[_M]]", on_system_login)

    def save_model(self, request: HttpRequest, obj: _M, form: Any, change: bool) -> None:
        obj.save(using=system_alias())
