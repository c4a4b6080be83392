"""Work items from the rows the statement engine returns (it knows no model)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import cache
from operator import itemgetter
from typing import Any

from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from workqueue.models import WorkItem
from wqcore.conf import tenant_alias
from wqcore.store import Rows

# The item's JSON columns that always hold an object (or NULL): Django's psycopg set-up loads
# text-format jsonb as text for JSONField to parse, and these rows skip JSONField, so a string
# here is that text. (Not the result: a JSON string is a result too.)
_JSON_OBJECTS = ("payload", "progress", "meta")


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
    in_model_order = itemgetter(*order)
    items = []
    # What from_db does (the model's __init__ with every field's value, then the state of a
    # row read from ``alias``), without __init__'s walk over the fields by keyword: a claim
    # builds a hundred items per batch on the worker's path. Only while nobody listens to the
    # model's init signals (then from_db, which sends them).
    plain = not (pre_init.has_listeners(WorkItem) or post_init.has_listeners(WorkItem))
    for row in rows:
        if plain:
            item = WorkItem.__new__(WorkItem)
            item.__dict__.update(zip(attnames, in_model_order(row), strict=True))
            state = item._state = ModelState()
            state.adding, state.db = False, alias
        else:
            item = WorkItem.from_db(alias, attnames, [row[i] for i in order])
        values = item.__dict__
        for name in _JSON_OBJECTS:
            value = values[name]
            if isinstance(value, str):
                # Most items' metadata is empty: a new dict costs far less than parsing "{}".
                values[name] = {} if value == "{}" else json.loads(value)
        items.append(item)
    return items


def items_of(rows: Rows, alias: str | None = None) -> list[WorkItem]:
    """The work items a statement returned, as read through ``alias`` (the everyday login's
    unless named)."""
    return items_from_rows(alias or tenant_alias(), rows.names, rows.rows)
