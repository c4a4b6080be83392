"""The triage actions: each is one registered class saying its name, its words, who may use
it, what its confirmation page asks for (a form), and what it does.

Everything else is read from the registry (``TRIAGE_ACTIONS``): a list offers the actions that
act on a status it shows, an item's page the ones that act on its status, the confirmation page
draws the action's form and words, and the dead-letter list links each action's triage by
filter. A new action is one class here under ``@triage_action`` (and a template only if its
page really needs its own).

Each acts under the items' tenant through one of the store's triage statements, fenced on the
status and ``updated_at`` its confirmation page drew and audited in the same statement with
the operator as actor (``workqueue/triage.py``, ``workqueue/cancel.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django import forms
from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from tenancy.contexts import OpContext
from workqueue.cancel import CANCELLABLE, cancel_drawn
from workqueue.exceptions import Conflict
from workqueue.models import WorkItem
from workqueue.triage import Drawn, Triaged, discard, requeue_dead, requeue_edited
from workqueue.triage.drawn import DISCARDABLE, MAX_DELAY_S, REQUEUEABLE

# The longest delay the "requeue later" page offers, in minutes.
MAX_DELAY_MINUTES = MAX_DELAY_S // 60


class Refused(Exception):
    """A triage request the operator must fix first (shown on the confirmation page)."""


@dataclass(frozen=True)
class ByFilter:
    """An action's triage by filter: every dead letter the list's filters match, acted on by
    the server in bounded batches (``workqueue.triage.act_on_every_match``)."""

    # The store's matching action, and the page's URL (``matching/<name>/``).
    name: str
    # Its words on its confirmation page and in its message.
    verb: str
    # What that page says it does.
    says: str


class NoInputs(forms.Form):
    """A confirmation page that asks for nothing but the confirmation."""


class TriageAction:
    """Base of the triage actions. Register each with ``@triage_action``."""

    # Its name in the admin's posts (the ``action`` field) and on the item page's buttons.
    name = ""
    # Its words in a list's action menu.
    label = ""
    # Its words on its confirmation page, its button and its messages.
    verb = ""
    # What its confirmation page says it does.
    says = ""
    # The statuses it acts on; selected items in any other are left out.
    acts_on: frozenset[str] = frozenset()
    # Who may use it: the admin's ``has_<permission>_permission``.
    permission = "triage"
    # What its confirmation page asks for; its cleaned values reach ``act``. (A refused value
    # is shown as "<field>: <message>".)
    form: type[forms.Form] = NoInputs
    # Its pages are styled as a deletion's.
    destructive = False
    # Its triage by filter on the dead-letter list, if it has one.
    by_filter: ByFilter | None = None
    # Templates show its attributes; Django would otherwise call it (it is a callable).
    do_not_call_in_templates = True

    def __init__(self) -> None:
        # What Django's admin reads off an action in a ModelAdmin's ``actions``.
        self.__name__ = self.name
        self.short_description = self.label
        self.allowed_permissions = (self.permission,)

    def __call__(
        self, model_admin: Any, request: HttpRequest, queryset: QuerySet[Any]
    ) -> HttpResponse | None:
        """Chosen in a list: its confirmation page, then the action (``TriageAdmin.triage``)."""
        response: HttpResponse | None = model_admin.triage(request, queryset, self)
        return response

    def initial(self, items: list[WorkItem]) -> dict[str, Any]:
        """The confirmation form's first values for ``items``."""
        return {}

    def check(self, items: list[WorkItem]) -> None:
        """Raise ``Refused`` when this action does not take ``items`` together."""

    def act(self, ctx: OpContext, fences: list[Drawn], inputs: dict[str, Any]) -> Triaged:
        """Act on ``fences`` (one tenant's items) under ``ctx``, with the form's values."""
        raise NotImplementedError


TRIAGE_ACTIONS: dict[str, TriageAction] = {}


def triage_action[Action: type[TriageAction]](cls: Action) -> Action:
    """Register the action ``cls``: the lists, the item pages and the triage by filter offer
    it from here, in the order of registration."""
    action = cls()
    if not action.name or action.name in TRIAGE_ACTIONS:
        raise ImproperlyConfigured(f"{cls.__name__}: a triage action needs a name of its own")
    TRIAGE_ACTIONS[action.name] = action
    return cls


def actions_on(statuses: frozenset[str]) -> tuple[TriageAction, ...]:
    """The actions a list of items in ``statuses`` offers: those acting on one of them."""
    return tuple(action for action in TRIAGE_ACTIONS.values() if action.acts_on & statuses)


def action_of_filter(name: str) -> TriageAction | None:
    """The action whose triage by filter is named ``name`` (the URL's), if any."""
    for action in TRIAGE_ACTIONS.values():
        if action.by_filter is not None and action.by_filter.name == name:
            return action
    return None


def filter_triages() -> list[ByFilter]:
    """Every triage by filter, for the dead-letter pages' links."""
    return [action.by_filter for action in TRIAGE_ACTIONS.values() if action.by_filter]


# -- the actions, in the order the lists offer them ----------------------------------------------

REQUEUED_SAYS = "Attempts start again from 0; the last error stays in the item's history."
DISCARDED_SAYS = "A discarded item never runs; its audit entry keeps its payload and error."


@triage_action
class RequeueNow(TriageAction):
    name, label, verb = "requeue_now", "Requeue now (attempts reset)", "Requeue now"
    says = REQUEUED_SAYS
    acts_on = REQUEUEABLE
    by_filter = ByFilter(
        "requeue",
        "Requeue",
        "They go back to pending, due now, attempts from 0; each one's error stays in its history.",
    )

    def act(self, ctx: OpContext, fences: list[Drawn], inputs: dict[str, Any]) -> Triaged:
        return requeue_dead(ctx, fences)


class DelayForm(forms.Form):
    # A plain field: every wrong value, empty included, gets the one message below.
    delay_minutes = forms.Field(
        label=f"Delay (minutes, 1 to {MAX_DELAY_MINUTES})",
        initial="60",
        required=False,
        widget=forms.NumberInput(attrs={"min": 1, "max": MAX_DELAY_MINUTES, "required": True}),
    )

    def clean_delay_minutes(self) -> int:
        given = self.cleaned_data["delay_minutes"]
        # A post without the field (not the page's) takes the delay the page would have shown.
        raw = str(self.fields["delay_minutes"].initial if given is None else given).strip()
        # isdigit alone takes "²" and "٣": only ASCII digits are minutes.
        whole = raw.isascii() and raw.isdigit() and len(raw) <= 6
        if not whole or not 1 <= int(raw) <= MAX_DELAY_MINUTES:
            raise forms.ValidationError(
                f"must be a whole number of minutes from 1 to "
                f"{MAX_DELAY_MINUTES} (30 days), got {raw[:20]!r}"
            )
        return int(raw)


@triage_action
class RequeueLater(TriageAction):
    name, label, verb = "requeue_later", "Requeue after a delay", "Requeue after a delay"
    says = REQUEUED_SAYS
    acts_on = REQUEUEABLE
    form = DelayForm

    def act(self, ctx: OpContext, fences: list[Drawn], inputs: dict[str, Any]) -> Triaged:
        return requeue_dead(ctx, fences, delay_s=inputs["delay_minutes"] * 60)


@triage_action
class Discard(TriageAction):
    name, label, verb = "discard", "Discard (kept in the audit trail)", "Discard"
    says = DISCARDED_SAYS
    acts_on = DISCARDABLE
    destructive = True
    by_filter = ByFilter("discard", "Discard", DISCARDED_SAYS)

    def act(self, ctx: OpContext, fences: list[Drawn], inputs: dict[str, Any]) -> Triaged:
        return discard(ctx, fences)


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


class PayloadForm(forms.Form):
    # Kept as typed (not stripped), so a refused edit comes back to be corrected as it was.
    payload = forms.Field(
        label="Payload (JSON, checked against the kind's schema)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 14}),
    )

    def clean_payload(self) -> Any:
        text = str(self.cleaned_data["payload"] or "")
        try:
            return json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:
            raise forms.ValidationError(f"not valid JSON ({exc})") from None


@triage_action
class EditPayload(TriageAction):
    """The kind's schema checks the edit when it acts (``requeue_edited``)."""

    name = "edit_payload"
    label = verb = "Edit the payload, then requeue"
    says = REQUEUED_SAYS
    acts_on = REQUEUEABLE
    form = PayloadForm

    def check(self, items: list[WorkItem]) -> None:
        if len(items) != 1:
            raise Refused("items: edit one item at a time (select exactly one)")

    def initial(self, items: list[WorkItem]) -> dict[str, Any]:
        return {"payload": json.dumps(items[0].payload, indent=2, sort_keys=True)}

    def act(self, ctx: OpContext, fences: list[Drawn], inputs: dict[str, Any]) -> Triaged:
        changed, refused = [], []
        for fence in fences:  # one, unless a forged page sent its fence twice
            try:
                changed.append(requeue_edited(ctx, fence, inputs["payload"]))
            except Conflict:
                refused.append(fence.id)
        return Triaged(changed, refused)


@triage_action
class Cancel(TriageAction):
    """A pending item is cancelled at once; a claimed one's holder is asked (it ends the item
    cancelled at its next lease renewal). Fenced like the others, except that a claimed item's
    ``updated_at`` moves at every renewal: its fence is that it is still claimed."""

    name, label, verb = "cancel", "Cancel (pending now; running: its worker is asked)", "Cancel"
    says = (
        "A pending item is cancelled now and never runs; a running one's worker is asked, and "
        "ends it at its next lease renewal (a dead letter if it already made its side effect)."
    )
    acts_on = CANCELLABLE

    def act(self, ctx: OpContext, fences: list[Drawn], inputs: dict[str, Any]) -> Triaged:
        return cancel_drawn(ctx, fences)
