"""The enqueue API: ``POST /api/work/`` puts work on the queue, ``GET /api/work/<id>`` reads it,
``POST /api/work/<id>/cancel`` cancels it.

For signed-in users (Django's session): the tenant is the user's membership (a member of
several names one with ``X-Org-ID``; naming one they do not belong to is refused by the tenancy
middleware), the author is the user, never a body field. CSRF is checked as Django checks it for
session authentication, once the user is known, so an anonymous caller learns 401, not a CSRF
failure. Nothing is read from the query string: a parameter there is refused by name. The
middleware runs each view inside the tenant's scope: the enqueue, its stored
``Idempotency-Key`` answer and the request commit together, or not at all. Every answer is JSON:
``{"item": ...}`` or ``{"error": "<field>: <why>", "field": "<field>"}``.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import resolve_url
from django.urls import NoReverseMatch
from django.utils.dateparse import parse_datetime
from django.views.decorators.csrf import csrf_exempt

from tenancy.contexts import OpContext, Role
from tenancy.membership import ORG_HEADER
from workqueue import api
from workqueue.idempotency import (
    KeyInFlight,
    KeyReused,
    Stored,
    check_key,
    claim_key,
    fingerprint,
    store_response,
)
from workqueue.inputs import check_caller_key, check_lane, check_when
from workqueue.lanes import declared_lanes, is_declared

# What a POST body may carry; anything else is refused by name (an author, a tenant, a status
# or an id in the body would be ignored silently otherwise).
FIELDS = (
    "kind",
    "payload",
    "idempotency_key",
    "run_at",
    "priority",
    "lane",
    "concurrency_key",
    "rate_key",
)
REQUIRED = ("kind", "payload")
KEY_HEADER = "Idempotency-Key"
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,60}")


def json_error(status: int, message: str, field: str | None = None, **headers: str) -> JsonResponse:
    """A JSON error naming the field at fault (the part of ``message`` before its colon)."""
    if field is None and ": " in message:
        field = message.split(": ", 1)[0]
    body: dict[str, Any] = {"error": message}
    if field:
        body["field"] = field
    response = JsonResponse(body, status=status)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def item_json(item: api.WorkItem) -> dict[str, Any]:
    """What the API shows of an item: never its claim token."""

    def when(value: datetime | None) -> str | None:
        return value.isoformat() if value is not None else None

    return {
        "id": str(item.id),
        "kind": item.kind,
        "lane": item.lane,
        "status": item.status,
        "payload": item.payload,
        "idempotency_key": item.idempotency_key,
        "concurrency_key": item.concurrency_key,
        "rate_key": item.rate_key,
        "priority": item.priority,
        "run_at": when(item.available_at),
        "attempts": item.attempts,
        "max_attempts": item.max_attempts,
        "last_error": item.last_error,
        # What its handler last reported (run.progress, run.set_meta): null / {} until then.
        "progress": item.progress,
        "meta": item.meta,
        "created_at": when(item.created_at),
        "updated_at": when(item.updated_at),
        "traceparent": item.traceparent,
        "cancel_requested_at": when(item.cancel_requested_at),
        # The workflow it is a step of (its status "waiting" while its parents run), or None.
        "workflow_id": str(item.workflow_id) if item.workflow_id else None,
        # What its handler returned (JSON; null until it is done, or when it returned None).
        "result": item.result,
    }


class _CsrfCheck(CsrfViewMiddleware):
    """Django's CSRF check, returning the reason it refuses instead of a page."""

    def _reject(self, request: HttpRequest, reason: str) -> str:
        return reason


def _no_view(request: HttpRequest) -> HttpResponse:
    """The response and the view the CSRF check is handed: it calls neither, and reads only the
    view's ``csrf_exempt`` (unset here: the request is checked)."""
    raise AssertionError("the CSRF check calls no view")


def _csrf_refusal(request: HttpRequest) -> str | None:
    """Why Django's CSRF check refuses ``request``, or None."""
    refused = _CsrfCheck(_no_view).process_view(request, _no_view, (), {})
    # A cast the override above keeps true: _reject hands back the reason, not a page.
    return cast("str | None", refused)


def sign_in_url() -> str:
    """Where the site signs its users in: ``LOGIN_URL`` (a URL name resolved, as Django's
    ``login_required`` does; a name the site's URLs lack is shown as it is written)."""
    try:
        return resolve_url(settings.LOGIN_URL)
    except NoReverseMatch:
        return str(settings.LOGIN_URL)


def member_context(request: HttpRequest) -> OpContext | JsonResponse:
    """The signed-in member's context, or the answer that refuses the request."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return json_error(
            401,
            f"sign in first (a session cookie from {sign_in_url()})",
            "",
            WWW_Authenticate="Session",
        )
    refused = _csrf_refusal(request)
    if refused:
        return json_error(403, f"CSRF: {refused}; send the csrftoken cookie's value as X-CSRFToken")
    op: OpContext | None = getattr(request, "op", None)
    if op is None:
        return json_error(403, "you are not a member of any tenant", "")
    return op


def refuse_query(request: HttpRequest) -> JsonResponse | None:
    """The API takes nothing from the query string: a parameter there (a tenant, an author) is
    refused by name, as an unknown body field is, never ignored while the request goes ahead."""
    if not request.GET:
        return None
    name = sorted(request.GET)[0][:60]
    return json_error(
        400,
        f"{name}: unknown query parameter (the API takes none; the tenant and the author come "
        f"from the signed-in user, or {ORG_HEADER})",
        name,
    )


def posting_member(request: HttpRequest) -> OpContext | JsonResponse:
    """For a POST of the API: the signed-in member's context, or the answer that refuses the
    request (another method, no member, a query string)."""
    if request.method != "POST":
        return not_allowed("POST")
    op = member_context(request)
    if isinstance(op, JsonResponse):
        return op
    return refuse_query(request) or op


def not_allowed(allowed: str) -> JsonResponse:
    return json_error(405, f"method not allowed: use {allowed}", "", Allow=allowed)


def _body(request: HttpRequest) -> dict[str, Any] | JsonResponse:
    """The JSON object a POST carries, or the answer that refuses it."""
    if request.content_type != "application/json":
        return json_error(415, "Content-Type: must be application/json")
    charset = (request.content_params or {}).get("charset", "utf-8").lower()
    if charset not in ("utf-8", "utf8"):
        return json_error(415, "Content-Type: JSON must be sent as UTF-8")
    try:
        raw = request.body
    except RequestDataTooBig:
        return json_error(413, "body: larger than the server accepts (DATA_UPLOAD_MAX_MEMORY_SIZE)")

    def refuse_constant(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=refuse_constant)
    except UnicodeDecodeError:
        return json_error(400, "body: not valid UTF-8")
    except RecursionError:
        return json_error(400, "body: nested too deeply")
    except ValueError as exc:
        return json_error(400, f"body: not valid JSON ({exc})")
    if not isinstance(body, dict):
        return json_error(400, f"body: must be a JSON object, got {type(body).__name__}")
    # Every field at fault in one answer (a caller fixes them in one go); ``field``, the first.
    unknown = [field_name(name) for name in sorted(set(body) - set(FIELDS))]
    said = [f"{name}: unknown field" for name in unknown]
    if said:
        said[0] += (
            f" (a body has {', '.join(FIELDS)}; the author and tenant come from the signed-in user)"
        )
    missing = [name for name in REQUIRED if name not in body]
    said += [f"{name}: required" for name in missing]
    if said:
        return json_error(400, "; ".join(said), (unknown + missing)[0])
    return body


def field_name(name: str) -> str:
    """A body field's name as an answer names it: as it is when it is a plain name, else as
    ``body["<name as JSON>"]`` (an empty name, or one with spaces, colons or control
    characters, would make the answer name no field, or another)."""
    if _PLAIN_NAME.fullmatch(name):
        return name
    return f"body[{json.dumps(name[:60])}]"


def _lane(value: Any) -> str | None:
    """The body's lane: a lane this site declares (``workqueue.lanes``), or absent for the
    kind's. A made-up lane would be a lane no worker serves, and a new series on every
    process's ``/metrics``; a caller may not grow either."""
    if value is None:
        return None
    lane = check_lane(value)
    if not is_declared(lane):
        declared = ", ".join(declared_lanes())
        raise api.InvalidPayload(
            f"lane: {lane!r} is not a lane this site declares (declared: {declared}); "
            "the site declares lanes in WORKQUEUE['LANES'] or by a kind"
        )
    return lane


def _run_at(value: Any) -> datetime | None:
    if value is None:
        return None
    when = None
    if isinstance(value, str) and len(value) <= 64:
        try:
            when = parse_datetime(value)
        except ValueError:
            when = None
    if when is None or when.tzinfo is None:
        raise api.InvalidPayload(
            "run_at: must be an ISO 8601 time with a time zone, e.g. 2030-01-01T09:00:00Z"
        )
    # Checked here, not by enqueue: its refusal would name available_at, no field of this body.
    return check_when(when, "run_at")


@csrf_exempt  # checked in member_context once the user is known, as Django checks session requests
def work_collection(request: HttpRequest) -> JsonResponse:
    """POST: enqueue one item in the member's tenant, by the member. 201 with the item; 200
    with the existing item when its ``idempotency_key`` was used before (``outcome``), or with
    the stored answer when the ``Idempotency-Key`` header replays an earlier request."""
    op = posting_member(request)
    if isinstance(op, JsonResponse):
        return op
    body = _body(request)
    if isinstance(body, JsonResponse):
        return body
    header = request.headers.get(KEY_HEADER)
    try:
        key = check_key(header, KEY_HEADER) if header is not None else None
        # A savepoint: a refused request leaves nothing, its key claim included.
        with transaction.atomic():
            claim: uuid.UUID | None = None
            if key is not None:
                claimed = claim_key(op, key, fingerprint("POST", request.path, body))
                if isinstance(claimed, Stored):
                    return JsonResponse(
                        claimed.body, status=200, headers={"Idempotent-Replayed": "true"}
                    )
                claim = claimed
            item, outcome = api.enqueue(
                op,
                body["kind"],
                body["payload"],
                idempotency_key=check_caller_key(body.get("idempotency_key")),
                lane=_lane(body.get("lane")),
                priority=body.get("priority", 0),
                available_at=_run_at(body.get("run_at")),
                concurrency_key=body.get("concurrency_key"),
                rate_key=body.get("rate_key"),
            )
            status = 201 if outcome == api.Outcome.INSERTED else 200
            answer = {"item": item_json(item), "outcome": outcome.value}
            if claim is not None:
                store_response(op, claim, status, answer)
    except api.InvalidPayload as exc:
        return json_error(400, str(exc))
    except KeyReused as exc:
        return json_error(422, f"{KEY_HEADER}: {exc}")
    except KeyInFlight as exc:
        return json_error(409, f"{KEY_HEADER}: {exc}")
    except api.Conflict as exc:
        return json_error(409, str(exc), "")
    return JsonResponse(answer, status=status, headers={"Location": f"/api/work/{item.id}"})


def work_item(request: HttpRequest, item_id: str) -> JsonResponse:
    """GET: the item, read under the member's tenant (row-level security): 404 for an id of
    another tenant, as for one that does not exist."""
    if request.method not in ("GET", "HEAD"):
        return not_allowed("GET")
    op = member_context(request)
    if isinstance(op, JsonResponse):
        return op
    refused = refuse_query(request)
    if refused is not None:
        return refused
    wanted = parse_id(item_id)
    # The view runs in the member's tenant scope: the everyday login sees this tenant's rows only.
    item = api.WorkItem.objects.filter(pk=wanted).first() if wanted else None
    if item is None:
        return json_error(404, "no such work item in your tenant", "")
    return JsonResponse({"item": item_json(item)})


# Who may cancel any item of the tenant; a member cancels the items they enqueued.
CANCEL_ANY = frozenset({Role.OWNER, Role.ADMIN})


def parse_id(item_id: str) -> uuid.UUID | None:
    """An id from a URL, or None when it is no UUID (answered as one that does not exist)."""
    try:
        return uuid.UUID(item_id) if len(item_id) <= 64 else None
    except ValueError:
        return None


@csrf_exempt  # checked in member_context once the user is known, as Django checks session requests
def cancel_item(request: HttpRequest, item_id: str) -> JsonResponse:
    """POST: cancel the item, in the member's tenant, by the member (``api.cancel``, audited
    with them as actor). 200 with the item ``cancelled`` (now, or before: ``outcome``); 202
    with the item still ``claimed`` and ``cancel_requested_at`` set: its worker ends it at its
    next lease renewal; 404 for an id of another tenant, as for one that does not exist; 403
    for a member cancelling another member's item (owners and admins cancel any); 409 when it
    is done, failed or discarded already. The body is empty (or ``{}``)."""
    op = posting_member(request)
    if isinstance(op, JsonResponse):
        return op
    try:
        if request.body.strip() not in (b"", b"{}"):
            return json_error(400, "body: cancel takes no body (send none, or {})")
    except RequestDataTooBig:
        return json_error(413, "body: larger than the server accepts (DATA_UPLOAD_MAX_MEMORY_SIZE)")
    wanted = parse_id(item_id)
    # Read under the member's tenant (row-level security): another tenant's id is not found.
    item = api.WorkItem.objects.filter(pk=wanted).first() if wanted else None
    if item is None:
        return json_error(404, "no such work item in your tenant", "")
    if op.role not in CANCEL_ANY and item.created_by != op.user_id:
        return json_error(
            403, "role: a member cancels the items they enqueued; owners and admins cancel any"
        )
    was_cancelled = item.status == api.Status.CANCELLED
    try:
        with transaction.atomic():
            item = api.cancel(op, item.id)
    except api.NotFound:
        return json_error(404, "no such work item in your tenant", "")
    except api.Conflict as exc:
        return json_error(409, f"status: {exc}")
    if item.status == api.Status.CANCELLED:
        outcome = "already_cancelled" if was_cancelled else "cancelled"
        return JsonResponse({"item": item_json(item), "outcome": outcome}, status=200)
    return JsonResponse({"item": item_json(item), "outcome": "cancel_requested"}, status=202)
