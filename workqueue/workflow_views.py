"""The workflow API: ``POST /api/workflows/<id>/cancel``, beside the work API
(``workqueue/views.py``, whose sign-in, CSRF and query rules it shares)."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from workqueue.exceptions import NotFound
from workqueue.models import WorkItem
from workqueue.views import (
    CANCEL_ANY,
    json_error,
    parse_id,
    posting_member,
)
from workqueue.workflows.cancel import REASON_MAX, cancel_workflow

NOT_FOUND = "no such workflow in your tenant"


def _reason(request: HttpRequest) -> str | JsonResponse:
    """The body's ``reason`` (none: the default), or the answer that refuses the body."""
    try:
        raw = request.body.strip()
    except RequestDataTooBig:
        return json_error(413, "body: larger than the server accepts (DATA_UPLOAD_MAX_MEMORY_SIZE)")
    if not raw:
        return "workflow cancelled"
    try:
        body: Any = json.loads(raw)
    except (ValueError, RecursionError):
        return json_error(400, 'body: not valid JSON (send none, {} or {"reason": "..."})')
    if not isinstance(body, dict) or set(body) - {"reason"}:
        return json_error(400, 'body: a cancel takes only a reason ({"reason": "..."})')
    reason = body.get("reason", "workflow cancelled")
    if not isinstance(reason, str) or not 0 < len(reason) <= REASON_MAX or "\x00" in reason:
        return json_error(400, f"reason: must be text of 1 to {REASON_MAX} characters", "reason")
    return reason


@csrf_exempt  # checked in member_context once the user is known, as for the work API
def cancel_workflow_view(request: HttpRequest, workflow_id: str) -> JsonResponse:
    """POST: cancel the workflow in the member's tenant, by the member
    (``api.cancel_workflow``, audited per step with them as actor): 200 with how many waiting
    or pending steps were cancelled and how many running ones were asked to stop; 404 for a
    workflow of another tenant, as for one that does not exist; 403 for a member cancelling
    another member's workflow (owners and admins cancel any). The body is empty, ``{}`` or
    ``{"reason": "..."}``."""
    op = posting_member(request)
    if isinstance(op, JsonResponse):
        return op
    reason = _reason(request)
    if isinstance(reason, JsonResponse):
        return reason
    wanted = parse_id(workflow_id)
    # Its first step (whose id is the workflow's), read under the member's tenant (row-level
    # security): another tenant's is not found.
    step = WorkItem.objects.filter(pk=wanted, workflow_id=wanted).first() if wanted else None
    if step is None:
        return json_error(404, NOT_FOUND, "")
    if op.role not in CANCEL_ANY and step.created_by != op.user_id:
        return json_error(
            403, "role: a member cancels the workflows they declared; owners and admins cancel any"
        )
    try:
        with transaction.atomic():
            cancelled = cancel_workflow(op, wanted, reason)
    except NotFound:
        return json_error(404, NOT_FOUND, "")
    return JsonResponse(
        {
            "workflow_id": str(wanted),
            "cancelled": cancelled.cancelled,
            "cancel_requested": cancelled.requested,
        }
    )
