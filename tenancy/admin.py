"""The orgs tenancy in the admin: orgs and memberships, managed by the operator on the system
login, read by each org's staff under row-level security (``tenancy.admin_fence``). Users are
the site's own, in the site's own user admin."""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from tenancy import support
from tenancy.admin_fence import OperatorWrites, support_tenant
from tenancy.contexts import Role
from tenancy.models import Membership, Org
from wqcore.conf import system_alias
from wqcore.generics import ModelForm


class OrgForm(ModelForm[Org]):
    class Meta:
        model = Org
        fields = ("name", "slug", "gone_at")

    def clean_slug(self) -> str:
        # Django's unique check reads the default alias, where row-level security shows one
        # org at most; the operator's check must see them all.
        slug: str = self.cleaned_data["slug"]
        taken = Org.objects.using(system_alias()).filter(slug=slug).exclude(pk=self.instance.pk)
        if taken.exists():
            raise forms.ValidationError("An org with this slug already exists.")
        return slug


@admin.register(Org)
class OrgAdmin(OperatorWrites[Org]):
    form = OrgForm
    list_display = ("name", "slug", "id", "created_at", "gone_at", "support_link")
    search_fields = ("name", "slug")
    ordering = ("name",)
    readonly_fields = ("id", "created_at")

    @admin.display(description="support view")
    def support_link(self, org: Org) -> str:
        if org.gone_at is not None:
            return ""
        url = reverse("admin:workqueue_tenancy_support")
        return format_html(
            '<a href="{}?org={}" class="support-link">see as its staff…</a>', url, org.id
        )

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = super().get_list_display(request)
        if support.may_support(request.user) and support_tenant(request) is None:
            return shown
        return tuple(f for f in shown if f != "support_link")

    def get_urls(self) -> list[URLPattern]:
        page = path(
            "support/",
            self.admin_site.admin_view(self.support_view),
            name="workqueue_tenancy_support",
        )
        return [page, *super().get_urls()]

    def support_view(self, request: HttpRequest) -> HttpResponse:
        """The support view's page (``tenancy.support``): pick a live org to see the admin as
        its staff do, or leave the one in effect."""
        if not support.may_support(request.user):
            raise PermissionDenied("the support view is for the site's operator and its viewers")
        here = reverse("admin:workqueue_tenancy_support")
        if request.method == "POST":
            if request.POST.get("action") == "leave":
                support.end(request)
                messages.success(request, "You left the support view.")
                return HttpResponseRedirect(here)
            org = self._live_org(request.POST.get("org", ""))
            if org is None:
                messages.error(request, "org: choose a live org from the list; nothing changed.")
                return HttpResponseRedirect(here)
            support.begin(request, org.id)
            return HttpResponseRedirect(reverse("admin:index"))
        viewing = support_tenant(request)
        orgs = Org.objects.using(system_alias()).live().order_by("name")[: support.ORGS_LISTED]
        context = {
            **self.admin_site.each_context(request),
            "title": "Support view",
            "opts": self.opts,
            "viewing": None if viewing is None else self._live_org(str(viewing)),
            "orgs": orgs,
            "picked": request.GET.get("org", ""),
        }
        return TemplateResponse(request, "admin/workqueue_tenancy/support.html", context)

    @staticmethod
    def _live_org(text: str) -> Org | None:
        try:
            org_id = uuid.UUID(text)
        except ValueError:
            return None
        return Org.objects.using(system_alias()).live().filter(pk=org_id).first()


class MembershipForm(ModelForm[Membership]):
    # The service role is never given to a person (a check constraint says so too).
    role = forms.ChoiceField(choices=[(r.value, r.label) for r in Role if r != Role.SERVICE])

    class Meta:
        model = Membership
        fields = ("org", "user", "role", "ended_at")


@admin.register(Membership)
class MembershipAdmin(OperatorWrites[Membership]):
    form = MembershipForm
    list_display = ("username", "org", "role", "created_at", "ended_at")
    list_filter = ("role",)
    ordering = ("-created_at",)
    raw_id_fields = ("user",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Membership]:
        # A join to the user table is refused on the everyday login: the members' users are
        # read apart, on the system login (tenancy/routers.py), for the members listed.
        return super().get_queryset(request).prefetch_related("user", "org")

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "org":
            kwargs["queryset"] = Org.objects.using(system_alias()).order_by("name")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description="user")
    def username(self, membership: Membership) -> str:
        return membership.user.get_username()
