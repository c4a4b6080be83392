"""The triage actions' common path: a confirmation page first, then the action on what that
page drew.

Every action acts on at most ``MAX_BATCH`` items, per tenant under that tenant's context, in
one transaction, and says which items changed meanwhile and were left alone. Nothing here knows
one action from another: each brings its words, its form and its deed (``actions.py``)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import NON_FIELD_ERRORS
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from tenancy.admin_fence import TenantAdmin, may_act, shows_tenants
from workqueue.admin.actions import Refused, TriageAction, actions_on
from workqueue.admin.scope import actor_in
from workqueue.exceptions import InvalidPayload
from workqueue.models import WorkItem
from workqueue.triage import MAX_BATCH, Drawn

# How many of the ids left alone a message names.
REFUSED_NAMED = 10


class TriageAdmin(TenantAdmin[WorkItem]):
    """A tenant table's admin whose items are triaged by the registered actions."""

    # The statuses the list shows: it offers the triage actions that act on one of them.
    statuses: frozenset[str] = frozenset()

    @property
    def actions(self) -> tuple[TriageAction, ...]:  # type: ignore[override]
        # Read from the registry when the admin asks, not when this class was made: an action
        # registered later is offered too. (Django's is a class attribute, hence the ignore.)
        return actions_on(self.statuses)

    def has_triage_permission(self, request: HttpRequest) -> bool:
        return may_act(request)

    def hand_over(self, request: HttpRequest, action: TriageAction) -> HttpResponse | None:
        """Where a "select all" of the list goes instead of acting on a selection (None:
        nowhere, the selection is bounded like any other)."""
        return None

    def triage(
        self, request: HttpRequest, queryset: QuerySet[Any], action: TriageAction
    ) -> HttpResponse | None:
        """Show the confirmation page; on its confirmation, act on what it drew."""
        if request.POST.get("select_across") == "1":
            handed = self.hand_over(request, action)
            if handed is not None:
                return handed
        selected = list(queryset.order_by("-id")[: MAX_BATCH + 1])
        if len(selected) > MAX_BATCH:
            self._refuse(request, f"Select at most {MAX_BATCH} items at a time")
            return None
        eligible = [item for item in selected if item.status in action.acts_on]
        skipped = [item for item in selected if item.status not in action.acts_on]
        confirming = request.POST.get("confirm") == "yes"
        if not eligible:
            return self._none_eligible(request, action, confirming)
        if confirming:
            form = action.form(request.POST)
        else:
            form = action.form(initial=action.initial(eligible))
        try:
            action.check(eligible)
        except Refused as exc:
            if not confirming:  # nothing to correct on a page not drawn yet
                self._refuse(request, str(exc))
                return None
            return self._confirmation(request, action, eligible, skipped, form, str(exc))
        problem = self._act_if_valid(request, action, eligible, form) if confirming else None
        if confirming and problem is None:
            return None
        return self._confirmation(request, action, eligible, skipped, form, problem)

    def _refuse(self, request: HttpRequest, problem: str) -> None:
        self.message_user(request, f"{problem}; nothing was changed.", messages.ERROR)

    def _none_eligible(
        self, request: HttpRequest, action: TriageAction, confirming: bool
    ) -> HttpResponse | None:
        """No selected item is in a status the action acts on."""
        if confirming:
            # Everything the page drew has changed since (or left this list): say so.
            try:
                self._act(request, [], action, {})
            except Refused as exc:
                self._refuse(request, str(exc))
            return None
        wanted = " or ".join(sorted(action.acts_on))
        self.message_user(
            request,
            f"{action.verb}: none of the selected items is {wanted}; nothing was changed.",
            messages.WARNING,
        )
        return None

    def _act_if_valid(
        self, request: HttpRequest, action: TriageAction, items: list[WorkItem], form: forms.Form
    ) -> str | None:
        """Act if the confirmation form's inputs hold; else what to correct on the page."""
        if not form.is_valid():
            return "; ".join(
                str(message) if field == NON_FIELD_ERRORS else f"{field}: {message}"
                for field, errors in form.errors.items()
                for message in errors
            )
        try:
            self._act(request, items, action, form.cleaned_data)
        except (Refused, InvalidPayload) as exc:
            return str(exc)
        return None

    def _act(
        self,
        request: HttpRequest,
        items: list[WorkItem],
        action: TriageAction,
        inputs: dict[str, Any],
    ) -> None:
        """Act on the fences the confirmation page drew, per tenant, in one transaction."""
        drawn = []
        for token in request.POST.getlist("fence"):
            try:
                drawn.append(Drawn.parse(token))
            except InvalidPayload as exc:
                raise Refused(str(exc)) from None
        if not drawn:
            raise Refused("fence: the page drew no items; go back to the list")
        org_of = {item.id: item.org_id for item in items}
        by_org: dict[uuid.UUID, list[Drawn]] = defaultdict(list)
        # A fence of no selected item (one that left this list, or another tenant's) is
        # reported like an item that changed.
        refused = [fence.id for fence in drawn if fence.id not in org_of]
        for fence in drawn:
            if fence.id in org_of:
                by_org[org_of[fence.id]].append(fence)
        changed: list[WorkItem] = []
        with transaction.atomic(using="default"):
            for org_id, fences in by_org.items():
                result = action.act(actor_in(request, org_id), fences, inputs)
                changed += result.changed
                refused += result.refused
        self._report(request, action, changed, refused)

    def _report(
        self,
        request: HttpRequest,
        action: TriageAction,
        changed: list[WorkItem],
        refused: list[uuid.UUID],
    ) -> None:
        if changed:
            self.message_user(
                request, f"{action.verb}: done for {len(changed)} item(s).", messages.SUCCESS
            )
        if refused:
            self.message_user(
                request,
                f"{len(refused)} item(s) changed since the page was drawn and were left as "
                f"they are (reload to see them now): "
                f"{', '.join(map(str, refused[:REFUSED_NAMED]))}"
                + (" …" if len(refused) > REFUSED_NAMED else ""),
                messages.WARNING,
            )

    def _confirmation(
        self,
        request: HttpRequest,
        action: TriageAction,
        items: list[WorkItem],
        skipped: list[WorkItem],
        form: forms.Form,
        problem: str | None,
    ) -> TemplateResponse:
        # On a second drawing (a correction), keep the fences of the first: what the operator
        # confirmed against is what they saw first.
        first = {}
        for token in request.POST.getlist("fence"):
            try:
                fence = Drawn.parse(token)
            except InvalidPayload:
                continue
            first[fence.id] = fence.token()
        context = {
            **self.admin_site.each_context(request),
            "title": f"{action.verb}: confirm",
            "opts": self.opts,
            "action": action,
            "items": [(item, first.get(item.id) or Drawn.of(item).token()) for item in items],
            "skipped": skipped,
            "form": form,
            "problem": problem,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "shows_tenants": shows_tenants(request),
        }
        return TemplateResponse(
            request, "admin/workqueue/triage_confirmation.html", context, status=200
        )
