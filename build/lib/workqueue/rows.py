"""Work items from the rows the statement engine returns (it knows no model)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from workqueue.models import WorkItem
from wqcore.conf import tenant_alias
from wqcore.store import Rows


@cache
def _field_order(names: tuple[str, ...]) -> tuple[list[int], list[str]]:
    """Where each model field sits among the result's columns (from_db wants model order)."""
    attnames = [f.attname for f in WorkItem._meta.concrete_fields]
    return [names.index(name) for name in attnames], attnames


def items_from_rows(
    alias: str, names: Sequence[str], rows: Iterable[Sequence[Any]]
) -> list[WorkItem]:
    """Work items from ``SELECT *``/``RETURNING *`` rows whose columns are ``names``."""
    order, attnames = _field_order(tuple(names))
    items = []
    for row in rows:
        item = WorkItem.from_db(alias, attnames, [row[i] for i in order])
        # Django's psycopg set-up loads text-format jsonb as text for JSONField to parse.
        if isinstance(item.payload, str):
            item.payload = json.loads(item.payload)
        items.append(item)
    return items


def items_of(rows: Rows, alias: str | None = None) -> list[WorkItem]:
    """The work items a statement returned, as read through ``alias`` (the everyday login's
    unless named)."""
    return items_from_rows(alias or tenant_alias(), rows.names, rows.rows)
