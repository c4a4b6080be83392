"""Work items and dead letters in the admin, with the triage actions.

Who sees which tenant's items, and how, is ``tenancy/admin.py``'s rule: the operator reads
every tenant on the system login; a tenant's staff read theirs under row-level security.

Lists stay fast on a million rows: no full count (``BoundedPaginator``), no facets, no
sortable columns (each would sort the whole table), filters drawn from the kind registry rather
than from ``DISTINCT`` over the table, search by exact id or key, and an order each list's
indexes serve: items newest first by their time-ordered id (the primary key), dead letters by
when they failed (``workitem_triage_idx``).

Every triage action (requeue now, requeue later, discard, edit the payload then requeue) shows
a confirmation page first, acts on at most ``api.MAX_BATCH`` items, runs as one of the store's
triage statements under the items' tenant (``workqueue/triage.py``: fenced on the status and
``updated_at`` the confirmation page drew, audited in the same statement with the operator as
actor), and says which items changed meanwhile and were left alone.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Model, OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html

from audit.models import AuditEntry
from tenancy.admin_fence import OperatorWrites, TenantAdmin, admin_alias, is_operator, tenant_staff
from tenancy.contexts import OpContext, actor_of
from tenancy.modes import current_tenancy
from tenancy.services import operator_context
from workqueue import api
from workqueue.claim import forget_caps
from workqueue.models import DeadLetter, Pause, Status, TenantShare, WorkItem
from wqcore.conf import system_alias, wq_settings

# The longest delay the "requeue later" page offers, in minutes (30 days).
MAX_DELAY_MINUTES = 43_200
# How many tenants the tenant filter lists (others are reached by ?org=<id>).
TENANT_CHOICES = 50


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
        return [(k, k) for k in api.known_kinds()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(kind=self.value()) if self.value() else queryset


class LaneFilter(admin.SimpleListFilter):
    title = "lane"
    parameter_name = "lane"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        lanes = {"default", *(api.get_kind(k).lane for k in api.known_kinds())}
        return [(lane, lane) for lane in sorted(lanes)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(lane=self.value()) if self.value() else queryset


# -- triage -------------------------------------------------------------------------------------


class Refused(Exception):
    """A triage request the operator must fix first (shown on the confirmation page)."""


def _actor(request: HttpRequest, org_id: uuid.UUID) -> OpContext:
    """Whom the audit entries name, in the tenant acted on: a tenant's staff act as
    themselves in their tenant; the operator in the tenant of the items."""
    staff = tenant_staff(request)
    if staff is not None and not is_operator(request):
        return staff
    return operator_context(request.rctx, org_id, request.user.pk)  # type: ignore[attr-defined]


class TriageAction:
    """One triage action: which statuses it acts on, its page's words, what it does."""

    name = ""
    verb = ""
    acts_on: frozenset[str] = frozenset()

    def extra(self, request: HttpRequest, items: list[WorkItem]) -> dict[str, Any]:
        """The values of the confirmation page's own inputs (for the page, and for ``act``)."""
        return {}

    def act(
        self, request: HttpRequest, ctx: OpContext, fences: list[api.Drawn], extra: dict[str, Any]
    ) -> api.Triaged:
        raise NotImplementedError


class RequeueNow(TriageAction):
    name, verb = "requeue_now", "Requeue now"
    acts_on = frozenset({Status.FAILED.value})

    def act(
        self, request: HttpRequest, ctx: OpContext, fences: list[api.Drawn], extra: dict[str, Any]
    ) -> api.Triaged:
        return api.requeue_dead(ctx, fences)


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
        self, request: HttpRequest, ctx: OpContext, fences: list[api.Drawn], extra: dict[str, Any]
    ) -> api.Triaged:
        return api.requeue_dead(ctx, fences, delay_s=extra["delay_s"])


class Discard(TriageAction):
    name, verb = "discard", "Discard"
    acts_on = frozenset({Status.FAILED.value, Status.PENDING.value})

    def act(
        self, request: HttpRequest, ctx: OpContext, fences: list[api.Drawn], extra: dict[str, Any]
    ) -> api.Triaged:
        return api.discard(ctx, fences)


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
        self, request: HttpRequest, ctx: OpContext, fences: list[api.Drawn], extra: dict[str, Any]
    ) -> api.Triaged:
        (fence,) = fences
        try:
            item = api.requeue_edited(ctx, fence, extra["payload"])
        except api.Conflict:
            return api.Triaged([], [fence.id])
        return api.Triaged([item], [])


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


TRIAGE = {a.name: a for a in (RequeueNow(), RequeueLater(), Discard(), EditPayload())}


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
    actions = ("requeue_now", "requeue_later", "discard", "edit_payload")
    change_form_template = "admin/workqueue/workitem/change_form.html"
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
        ("Claim and lease", {"fields": ("claimed_by", "claim_token", "lease_expires_at")}),
        (
            "Origin",
            {
                "fields": (
                    "created_by",
                    "request_id",
                    "traceparent",
                    "created_at",
                    "updated_at",
                    "updated_by",
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
        """The detail page: payload, full error, history from the audit trail, triage."""
        if obj is not None:
            history = (
                AuditEntry.objects.using(admin_alias(request))
                .filter(
                    org_id=obj.org_id, subject_type="workqueue.workitem", subject_id=str(obj.id)
                )
                .order_by("created_at")[:200]
            )
            context.update(
                item=obj,
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

    def triage(
        self, request: HttpRequest, queryset: QuerySet[Any], action: TriageAction
    ) -> HttpResponse | None:
        """Show the confirmation page; on its confirmation, act on what it drew."""
        selected = list(queryset.order_by("-id")[: api.MAX_BATCH + 1])
        if len(selected) > api.MAX_BATCH:
            self.message_user(
                request,
                f"Select at most {api.MAX_BATCH} items at a time; nothing was changed.",
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
                drawn.append(api.Drawn.parse(token))
            except api.InvalidPayload as exc:
                raise Refused(str(exc)) from None
        org_of = {item.id: item.org_id for item in items}
        by_org: dict[uuid.UUID, list[api.Drawn]] = defaultdict(list)
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
                fence = api.Drawn.parse(token)
            except api.InvalidPayload:
                continue
            first[fence.id] = fence.token()
        context = {
            **self.admin_site.each_context(request),
            "title": f"{action.verb}: confirm",
            "opts": self.opts,
            "action": action,
            "items": [(item, first.get(item.id) or api.Drawn.of(item).token()) for item in items],
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
    """Failed items, most recently failed first (``workitem_triage_idx``)."""

    list_display = ("short_id", "tenant", "kind", "tries", "error", "failed", "created")
    list_filter = (TenantFilter, KindFilter, LaneFilter)
    ordering = ("-updated_at",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).filter(status=Status.FAILED)

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
        self.fields["lane"].choices = [(lane, lane) for lane in api.declared_lanes()]
        self.fields["kind"].choices = [("", "(the whole lane)")] + [
            (k, k) for k in api.known_kinds()
        ]

    def validate_unique(self) -> None:
        # Checked by the pause itself (on the system login): a lane paused already stays as
        # its first pause made it, and the operator is told so.
        pass

    def validate_constraints(self) -> None:
        pass  # the same: the pause statement's ON CONFLICT


@admin.register(Pause)
class PauseAdmin(admin.ModelAdmin):
    """Paused lanes and kinds: the operator's only (a pause stops every tenant's work). Adding
    one pauses (``api.pause``), the "resume" action resumes (``api.resume``, which wakes the
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
        paused, changed = api.pause(
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
                ended := api.resume(
                    actor_of(request.user),
                    pause.lane,
                    pause.kind or None,
                    request_id=rctx.request_id if rctx is not None else None,
                )
            )
            is not None
        ]
        self.message_user(request, f"resumed: {', '.join(resumed) or 'nothing'}")
