"""A workflow's page in the admin (``workitem/workflow/<id>/``): its steps page by page with
their status and parents, its counts by status, its callbacks and whether they fired, the steps
that hold the rest up (a dead one links to its triage), and a confirmed, audited "cancel the
workflow" (``cancel_workflow``). Reached from each of its items (their page and the list's
column) and from the dead letters a workflow waits for (``HoldingChangeList``).

Who sees it is the items' rule: the operator reads every tenant on the system login, a tenant's
staff theirs under row-level security; another tenant's workflow is a 404 like one that never
was. Every reading is one bounded statement (``workqueue.workflows.overview``).
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from audit.api import actor_names
from tenancy.admin_fence import admin_alias
from tenancy.modes import has_tenants
from workqueue.admin.scope import actor_in, scope_of, tenants_have_names
from workqueue.exceptions import NotFound
from workqueue.models import Status, WorkItem
from workqueue.workflows.cancel import REASON_MAX, cancel_workflow
from workqueue.workflows.graph import (
    GRAPH_MAX,
    LEVELS_MAX,
    Node,
    draw,
    read_graph,
    statuses_drawn,
    summarise,
)
from workqueue.workflows.overview import (
    COUNT_CAP,
    Holding,
    read_blockers,
    read_callbacks,
    read_counts,
    read_holding,
    read_steps,
)

# The steps a page of the workflow shows.
STEPS_PER_PAGE = 50
# The statuses a cancel acts on (the others ended already).
LIVE = (Status.WAITING, Status.PENDING, Status.CLAIMED)


def workflow_url(workflow_id: uuid.UUID) -> str:
    return reverse("admin:workqueue_workitem_workflow", args=[workflow_id])


def workflow_link(workflow_id: uuid.UUID | None) -> str:
    """A link to a workflow's page, by the end of its id (empty for none)."""
    if workflow_id is None:
        return ""
    return format_html(
        '<a href="{}" class="workflow-link" title="{}">…{}</a>',
        workflow_url(workflow_id),
        workflow_id,
        str(workflow_id)[-12:],
    )


def node_href(node: Node) -> str:
    """Where a node of the graph leads: a dead step to its triage page, any other to its page."""
    if node.status == Status.FAILED:
        return reverse("admin:workqueue_deadletter_change", args=[node.id])
    return reverse("admin:workqueue_workitem_change", args=[node.id])


def graph_of(first: WorkItem, steps: int, scope: uuid.UUID | None) -> dict[str, Any]:
    """The page's graph: drawn node by node up to ``GRAPH_MAX`` steps, else summarised by level
    and status (up to ``LEVELS_MAX``; beyond, the counts by status say it all)."""
    if steps > LEVELS_MAX:
        return {"too_large": True}
    nodes = read_graph(first.org_id, first.id, min(steps, LEVELS_MAX), scope=scope)
    if not nodes:  # steps declared before their places were kept (migration 0013)
        return {}
    if len(nodes) <= GRAPH_MAX:
        drawing = draw(nodes, node_href)
        return {"drawing": drawing, "legend": statuses_drawn(drawing.boxes)}
    return {"summary": summarise(nodes)}


def counted(n: int) -> str:
    """A capped count as the pages say it."""
    return f"more than {COUNT_CAP:,}" if n > COUNT_CAP else f"{n:,}"


def holding_text(holding: Holding | None) -> str:
    """What a dead letter holds up, for the dead letters' list: the workflow it holds (a link)
    and how many waiting items need it done."""
    if holding is None:
        return ""
    held = holding.workflows[0] if holding.workflows else holding.workflow_id
    if not holding.waiting:
        return workflow_link(held)
    return format_html(
        '{}: <span class="holds">{} waiting</span>', workflow_link(held), counted(holding.waiting)
    )


class HoldingChangeList(ChangeList):
    """The dead letters' list, each row told what it holds up (``item.holding``), read for
    the whole page in one statement."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        held = read_holding([item.pk for item in self.result_list], scope=scope_of(request))
        for item in self.result_list:
            item.holding = held.get(item.pk)


class CancelForm(forms.Form):
    reason = forms.CharField(
        label="Reason (kept as each cancelled step's last error and in its audit entry)",
        max_length=REASON_MAX,
        required=False,
        widget=forms.TextInput(attrs={"size": 60}),
    )


class WorkflowPages:
    """The workflow's page and its cancel, on the items' admin (a mixin of ``WorkItemAdmin``)."""

    admin_site: Any
    opts: Any
    model: Any

    def workflow_urls(self) -> list[Any]:
        if self.model is not WorkItem:  # the dead letters link to the items' pages
            return []
        view = self.admin_site.admin_view
        return [
            path(
                "workflow/<uuid:workflow_id>/",
                view(self.workflow_view),
                name="workqueue_workitem_workflow",
            ),
            path(
                "workflow/<uuid:workflow_id>/cancel/",
                view(self.cancel_workflow_view),
                name="workqueue_workitem_workflow_cancel",
            ),
        ]

    def _first_step(self, request: HttpRequest, workflow_id: uuid.UUID) -> WorkItem:
        """The workflow's first step (its id is the workflow's), read as the user reads items:
        another tenant's is not found."""
        if not self.has_view_permission(request):  # type: ignore[attr-defined]
            raise PermissionDenied
        first = (
            WorkItem.objects.using(admin_alias(request))
            .filter(pk=workflow_id, workflow_id=workflow_id)
            .first()
        )
        if first is None:
            raise Http404("no workflow with that id")
        return first

    def _page(
        self, request: HttpRequest, title: str, template: str, first: WorkItem, **extra: Any
    ) -> TemplateResponse:
        # None in a single-tenant site: its pages name no tenant.
        tenant: str | None = str(first.org_id) if has_tenants() else None
        if tenants_have_names():
            from tenancy.models import Org

            named = Org.objects.using(admin_alias(request)).filter(pk=first.org_id).first()
            tenant = named.name if named is not None else tenant
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.opts,
            "first": first,
            "workflow_id": first.id,
            "tenant": tenant,
            "author": actor_names([first.created_by]).get(first.created_by, first.created_by),
            **extra,
        }
        return TemplateResponse(request, template, context)

    def workflow_view(self, request: HttpRequest, workflow_id: uuid.UUID) -> HttpResponse:
        """The workflow's page: counts, blockers, callbacks, a page of steps (``?after=``)."""
        first = self._first_step(request, workflow_id)
        scope = scope_of(request)
        try:
            after = uuid.UUID(request.GET["after"]) if request.GET.get("after") else None
        except ValueError:
            raise Http404("after: not a step's id") from None
        counts = read_counts(first.org_id, workflow_id, scope=scope)
        page = read_steps(first.org_id, workflow_id, after, STEPS_PER_PAGE, scope=scope)
        live = sum(counts.get(status, 0) for status in LIVE)
        total = sum(counts.values())
        # The graph on the first page only: a summary reads every step.
        graph = graph_of(first, total, scope) if after is None else {}
        return self._page(
            request,
            f"Workflow …{str(workflow_id)[-12:]}",
            "admin/workqueue/workflow.html",
            first,
            counts=counts,
            total=total,
            live=live,
            graph=graph,
            graph_max=GRAPH_MAX,
            blockers=read_blockers(first.org_id, workflow_id, scope=scope),
            callbacks=read_callbacks(first.org_id, workflow_id, scope=scope),
            steps=page.steps,
            after=after,
            next_after=page.next_after,
            can_cancel=live > 0 and self.has_triage_permission(request),  # type: ignore[attr-defined]
            count_cap=COUNT_CAP,
        )

    def cancel_workflow_view(self, request: HttpRequest, workflow_id: uuid.UUID) -> HttpResponse:
        """Cancel the workflow: a confirmation page (what is live now), then, confirmed,
        ``cancel_workflow`` under its tenant with the user as actor, audited per step."""
        first = self._first_step(request, workflow_id)
        if not self.has_triage_permission(request):  # type: ignore[attr-defined]
            raise PermissionDenied
        confirming = request.method == "POST" and request.POST.get("confirm") == "yes"
        form = CancelForm(request.POST if confirming else None)
        if confirming and form.is_valid():
            reason = form.cleaned_data["reason"].strip() or "workflow cancelled in the admin"
            try:
                with transaction.atomic(using="default"):
                    done = cancel_workflow(actor_in(request, first.org_id), workflow_id, reason)
            except NotFound:
                raise Http404("no workflow with that id") from None
            messages.success(
                request,
                f"Cancel workflow: {done.cancelled} step(s) cancelled, {done.requested} "
                "running step(s) asked to stop.",
            )
            return HttpResponseRedirect(workflow_url(workflow_id))
        counts = read_counts(first.org_id, workflow_id, scope=scope_of(request))
        return self._page(
            request,
            "Cancel the workflow: confirm",
            "admin/workqueue/workflow_cancel.html",
            first,
            form=form,
            live={status: counts.get(status, 0) for status in LIVE},
        )
