"""The operator's controls of the claim: each tenant's share of the fair claim (weight and
cap in flight), and paused lanes and kinds."""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from audit.api import actor_names
from tenancy.admin_fence import AdminRights, OperatorWrites, is_operator
from tenancy.contexts import actor_of
from tenancy.modes import current_tenancy
from workqueue.admin.scope import tenants_have_names
from workqueue.claim import forget_caps
from workqueue.kinds import known_kinds
from workqueue.lanes import declared_lanes
from workqueue.models import Pause, TenantShare
from workqueue.pauses import pause, resume
from wqcore.conf import system_alias, wq_settings
from wqcore.generics import ModelAdmin, ModelForm


class TenantShareForm(ModelForm[TenantShare]):
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
        if tenants_have_names():
            from tenancy.models import Org

            orgs = Org.objects.using(system_alias()).order_by("name").values_list("id", "name")
            self.fields["org_id"] = forms.TypedChoiceField(
                label="tenant", choices=list(orgs), coerce=uuid.UUID
            )


class TenantShareAdmin(OperatorWrites[TenantShare]):
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

    def save_model(self, request: HttpRequest, obj: TenantShare, form: Any, change: bool) -> None:
        obj.updated_at = timezone.now()
        super().save_model(request, obj, form, change)
        forget_caps()  # this process reads caps afresh; others within CAPS_CACHE_S


def _lane_choices() -> list[tuple[str, str]]:
    return [(lane, lane) for lane in declared_lanes()]


def _kind_choices() -> list[tuple[str, str]]:
    return [("", "(the whole lane)")] + [(k, k) for k in known_kinds()]


class PauseForm(ModelForm[Pause]):
    """Pause a declared lane, or one registered kind in it (the choices read when the form is
    drawn: a lane or kind declared later is offered too)."""

    lane = forms.ChoiceField(
        choices=_lane_choices,
        help_text="Workers claim none of this lane's items until resumed.",
    )
    kind = forms.ChoiceField(
        choices=_kind_choices,
        required=False,
        help_text="Only this kind in the lane; empty: the whole lane. Running items finish.",
    )

    class Meta:
        model = Pause
        fields = ("lane", "kind", "reason")

    def validate_unique(self) -> None:
        # Checked by the pause itself (on the system login): a lane paused already stays as
        # its first pause made it, and the operator is told so.
        pass


def request_id_of(request: HttpRequest) -> uuid.UUID | None:
    """The request's id for the audit entry (none outside the tenancy middleware)."""
    rctx = getattr(request, "rctx", None)
    return None if rctx is None else rctx.request_id


class PauseAdmin(AdminRights, ModelAdmin[Pause]):
    """Paused lanes and kinds: the operator's only (a pause stops every tenant's work). Adding
    one pauses (``pause``), the "resume" action resumes (``resume``, which wakes the
    lane's workers); both audited with the operator as actor. No edits and no deletes: a pause
    ends by resuming."""

    form = PauseForm
    tenant_staff_see = False
    operator_adds = True
    list_display = ("target", "paused_by_name", "reason", "paused_at")
    ordering = ("lane", "kind")
    actions = ["resume_selected"]

    @admin.display(description="paused")
    def target(self, pause: Pause) -> str:
        return str(pause)

    @admin.display(description="paused by", ordering="paused_by")
    def paused_by_name(self, pause: Pause) -> str:
        return actor_names([pause.paused_by]).get(pause.paused_by, pause.paused_by)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).using(system_alias())

    def save_model(self, request: HttpRequest, obj: Model, form: Any, change: bool) -> None:
        if not isinstance(obj, Pause) or not is_operator(request):
            raise PermissionDenied
        paused, changed = pause(
            actor_of(request.user),
            obj.lane,
            obj.kind or None,
            reason=obj.reason,
            request_id=request_id_of(request),
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
        actor, request_id = actor_of(request.user), request_id_of(request)
        resumed = [
            ended.target
            for pause in queryset
            if (ended := resume(actor, pause.lane, pause.kind or None, request_id=request_id))
            is not None
        ]
        self.message_user(request, f"resumed: {', '.join(resumed) or 'nothing'}")
