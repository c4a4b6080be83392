"""How the store's own connections read ``jsonb``: PostgreSQL's text of a jsonb value, parsed
without what ``json.loads`` does around the parse.

A claim of 100 reads each item's payload and metadata (most items' metadata is ``{}``), and
``json.loads`` of such small documents spends most of its time around the parse: finding the
bytes' encoding, and two whitespace scans, where jsonb's text never has any outside its values.
Parsed here by the same decoder, so a value reads the same (a drain spent about a tenth of its
loop's time in psycopg's jsonb loader: bench/RESULTS.md).
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from psycopg.adapt import AdaptersMap
from psycopg.types.json import set_json_loads

_decode = json.JSONDecoder().raw_decode


def loads(data: str | bytes) -> Any:
    """The value of a json or jsonb column's text (UTF-8 bytes, as psycopg hands it over)."""
    if data == b"{}":
        return {}
    text = data.decode() if isinstance(data, bytes) else data
    try:
        value, end = _decode(text)
    except ValueError:
        return json.loads(text)  # leading whitespace (json, not jsonb), or its own error
    if end != len(text):
        return json.loads(text)  # trailing whitespace, or its own error
    return value


# The adapters of the store's connections: psycopg's, with the loader above for json and jsonb.
ADAPTERS = AdaptersMap(psycopg.adapters)
set_json_loads(loads, ADAPTERS)
