"""The operator's rate limits: N per period on a kind, a lane, a tenant or a rate key, set,
changed and cleared here for every worker at once (``workqueue.rate_limits``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from audit.api import actor_names
from tenancy.admin_fence import AdminRights, is_operator
from tenancy.contexts import actor_of
from workqueue.admin.controls import request_id_of
from workqueue.exceptions import InvalidPayload
from workqueue.models import RateLimit
from workqueue.rate_limits import (
    check_burst,
    check_target,
    clear_rate_limit,
    parse_rate,
    set_rate_limit,
)
from wqcore.conf import system_alias
from wqcore.generics import ModelAdmin, ModelForm


class RateLimitForm(ModelForm[RateLimit]):
    """A limit as the operator writes it: scope, target, ``N/s`` (or ``/m``, ``/h``, ``/d``)
    and an optional burst, each checked as ``set_rate_limit`` checks it."""

    rate = forms.CharField(help_text="N/s, N/m, N/h or N/d, e.g. 10/s or 600/m.")
    burst = forms.IntegerField(
        required=False, min_value=1, help_text="How many may go at once; empty: N."
    )

    class Meta:
        model = RateLimit
        fields = ("scope", "target")
        help_texts = {
            "target": "The kind's or lane's name, the tenant's id, or the rate key; "
            "'*': each one its own bucket."
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            parsed = parse_rate(data.get("rate"))
            data["burst"] = check_burst(data.get("burst"), parsed)
            data["scope"], data["target"] = check_target(data.get("scope"), data.get("target"))
        except InvalidPayload as exc:
            field, _, message = str(exc).partition(": ")
            self.add_error(field if field in self.fields else None, message or str(exc))
        return data

    def validate_unique(self) -> None:
        # Setting a limit that exists changes it (the statement's ON CONFLICT).
        pass


class RateLimitAdmin(AdminRights, ModelAdmin[RateLimit]):
    """Rate limits: the operator's only (a limit holds back every tenant's work). Adding one
    sets it, or changes the one of its scope and target (``set_rate_limit``); the "clear"
    action removes them (``clear_rate_limit``); both audited with the operator as actor. No
    edits in place: set it again with the new rate."""

    form = RateLimitForm
    tenant_staff_see = False
    operator_adds = True
    list_display = ("scope", "target", "rate", "burst", "set_by_name", "updated_at")
    ordering = ("scope", "target")
    actions = ["clear_selected"]

    @admin.display(description="rate")
    def rate(self, limit: RateLimit) -> str:
        return f"{limit.count} per {limit.period_s} s"

    @admin.display(description="set by", ordering="set_by")
    def set_by_name(self, limit: RateLimit) -> str:
        return actor_names([limit.set_by]).get(limit.set_by, limit.set_by)

    def get_queryset(self, request: HttpRequest) -> QuerySet[RateLimit]:
        return super().get_queryset(request).using(system_alias())

    def save_model(self, request: HttpRequest, obj: RateLimit, form: Any, change: bool) -> None:
        if not is_operator(request):
            raise PermissionDenied
        data = form.cleaned_data
        limit = set_rate_limit(
            actor_of(request.user),
            data["scope"],
            data["target"],
            data["rate"],
            data["burst"],
            request_id=request_id_of(request),
        )
        obj.pk, obj.count, obj.period_s, obj.burst = limit.id, limit.n, limit.period_s, limit.burst

    @admin.action(description="Clear the selected rate limits")
    def clear_selected(self, request: HttpRequest, queryset: QuerySet[RateLimit]) -> None:
        if not is_operator(request):
            return
        actor, request_id = actor_of(request.user), request_id_of(request)
        cleared = [
            f"{lim.scope} {lim.target}"
            for lim in queryset
            if clear_rate_limit(actor, lim.scope, lim.target, request_id=request_id) is not None
        ]
        self.message_user(request, f"cleared: {', '.join(cleared) or 'nothing'}")
