"""Results: what a handler returned, stored with its item, and read back by id.

A handler's return value (a sync or async ``handle``, a Django ``@task``) is its item's
``result``: JSON, written by the statement that marks the item done, under its claim token
(``settle.complete``, ``settle.complete_many``), so a holder that lost its claim writes none
and a done item never lacks what it returned. None stores nothing (NULL).

What cannot be stored is refused before anything is written (``result_json``): a value JSON
cannot write (naming its type and where it sits), NaN or an infinity, a NUL character or a
lone surrogate, nesting deeper than ``PAYLOAD_DEPTH_MAX``, or more JSON than a payload may be
(``WORKQUEUE["MAX_PAYLOAD_BYTES"]``). The worker then dead-letters the item with that message
as a permanent error (the same code would return the same again): never retried, no result
written.

A result is kept as long as its item (purged with it), and read by id in the reader's tenant
(row-level security): ``result_of`` one, ``results_of`` many in one statement.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any, NamedTuple

from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.exceptions import InvalidPayload, NotFound, UnstorableResult
from workqueue.inputs import check_id, find_not_json, find_unstorable, may_be_too_deep, too_deep
from workqueue.kinds import max_payload_bytes
from wqcore.statements import Statement
from wqcore.store import Plan, Tenant, transition

# The most ids one ``results_of`` reads (one statement); read more in pages.
READ_MAX = 1000
# Made once: ``json.dumps`` with options makes an encoder per call, which cost more than the
# encoding of a small result.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class ReadResultsParams(NamedTuple):
    org_id: uuid.UUID
    ids: list[uuid.UUID]


READ_RESULTS = Statement("read_results", ReadResultsParams, SQL_DIR)


def result_json(value: object) -> str | None:
    """``value`` as the JSON text its item stores (None for None), or ``UnstorableResult``
    saying what to change: ``result...: why`` (where in the value, what is wrong)."""
    if value is None:
        return None
    try:
        text = _ENCODER.encode(value)
        raw = text.encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        raise UnstorableResult(_why_not(value, exc)) from None
    # jsonb refuses \u0000, and so that nesting stays within what a payload may have: each
    # walked only when a scan of the text found a suspect.
    if (b"\\u0000" in raw and (problem := find_unstorable(value, "result"))) or (
        may_be_too_deep(raw) and (problem := too_deep(value, "result"))
    ):
        raise UnstorableResult(problem)
    limit = max_payload_bytes()
    if len(raw) > limit:
        raise UnstorableResult(
            f"result: {len(raw)} bytes of JSON, the limit is {limit}; return less (an id, a "
            "URL) or raise the limit WORKQUEUE['MAX_PAYLOAD_BYTES']"
        )
    return text


def _why_not(value: object, exc: BaseException) -> str:
    """What ``json.dumps`` refused in ``value`` (``exc``), said as where and why."""
    if problem := too_deep(value, "result"):
        return problem
    if problem := find_not_json(value, "result"):
        return f"{problem}; return str, int, float, bool, None, or lists and dicts of them"
    # NaN, an infinity, a lone surrogate; else what json said (a type's own failure).
    return find_unstorable(value, "result") or f"result: not JSON ({type(exc).__name__}: {exc})"


@transition
def results_of(ctx: OpContext, item_ids: Iterable[uuid.UUID | str]) -> Plan[dict[uuid.UUID, Any]]:
    """The results of the items ``item_ids`` (at most ``READ_MAX``) in the context's tenant,
    by id, read in one statement. An id of another tenant is missing, as one that never was;
    an item without a result (not done yet, or its handler returned None) maps to None."""
    ids = list(dict.fromkeys(check_id(item_id, "item_ids") for item_id in item_ids))
    if len(ids) > READ_MAX:
        raise InvalidPayload(f"item_ids: at most {READ_MAX} per call (got {len(ids)})")
    if not ids:
        return {}
    rows = yield Tenant(ctx.org_id, READ_RESULTS, ReadResultsParams(ctx.org_id, ids))
    return {item_id: None if text is None else json.loads(text) for item_id, text in rows.rows}


@transition
def result_of(ctx: OpContext, item_id: uuid.UUID | str) -> Plan[Any]:
    """The result of the item ``item_id`` in the context's tenant: what its handler returned,
    or None (not done yet, or it returned None). ``NotFound`` for an id of another tenant, as
    for one that never was."""
    wanted = check_id(item_id, "item_id")
    found = yield from results_of.plan(ctx, [wanted])
    if wanted not in found:
        raise NotFound(f"no work item {wanted} in this tenant")
    return found[wanted]


aresult_of = result_of.aio
aresults_of = results_of.aio
