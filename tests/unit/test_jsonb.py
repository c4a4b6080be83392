"""The store's connections read json and jsonb as ``json.loads`` would, faster (wqcore.jsonb)."""

from __future__ import annotations

import json

import pytest
from django.db import connections

from wqcore.jsonb import loads

DOCUMENTS = [
    "{}",
    "[]",
    '{"seq": 12345}',
    '{"a": [1, 2.5, -3e10, true, false, null], "b": {"c": "d\\u00e9\\n"}}',
    '"text"',
    "12345678901234567890",
    "1.5",
    "null",
    '{"emoji": "\\ud83d\\ude00", "é": "ü"}',
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_a_document_reads_as_json_loads_reads_it(text: str) -> None:
    assert loads(text.encode()) == json.loads(text)
    assert type(loads(text.encode())) is type(json.loads(text))


def test_empty_objects_are_new_each_time() -> None:
    first = loads(b"{}")
    first["x"] = 1
    assert loads(b"{}") == {}


@pytest.mark.parametrize("text", [' {"a": 1}', '{"a": 1} ', "\n[1]\n"])
def test_whitespace_around_a_json_value_is_read_as_json_loads_reads_it(text: str) -> None:
    assert loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize("text", ["", "{", '{"a": 1} x', "nan"])
def test_a_broken_document_raises_as_json_loads_does(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        loads(text.encode())


@pytest.mark.django_db(databases=["system"])
def test_a_store_connection_reads_jsonb_and_json_columns_with_it() -> None:
    """On a connection made as the store makes its own (binary and text results alike)."""
    import psycopg

    from wqcore.async_face import connection_kwargs
    from wqcore.conf import system_alias

    connections[system_alias()].ensure_connection()
    with psycopg.Connection.connect(**connection_kwargs(system_alias())) as conn:
        for binary in (True, False):
            row = (
                conn.cursor(binary=binary)
                .execute(
                    "SELECT '{}'::jsonb, '{\"seq\": 7, \"x\": [1, null]}'::jsonb,"
                    " ' {\"a\" : 1} '::json, NULL::jsonb"
                )
                .fetchone()
            )
            assert row == ({}, {"seq": 7, "x": [1, None]}, {"a": 1}, None)
