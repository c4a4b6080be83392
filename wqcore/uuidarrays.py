"""Lists of UUIDs sent to the server in binary, in one pass.

psycopg sends a ``list`` parameter in text, element by element in Python (each UUID written as
hex, then searched for characters to quote): for the batch completion's three lists of a
hundred ids that was the worker's largest cost per item. A ``UUIDArray`` is dumped as
PostgreSQL's binary ``uuid[]`` instead: a header, then each UUID's 16 bytes. Statements wrap
their ``list[uuid.UUID]`` parameters in it (``wqcore.statements.Statement.bind_native``).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

UUID_OID = 2950
UUID_ARRAY_OID = 2951

# ndim, has-null flag, element type; then per dimension its length and lower bound.
_HEADER = struct.Struct("!iiIii")
_EMPTY = struct.pack("!iiI", 0, 0, UUID_OID)
_SIXTEEN = struct.pack("!i", 16)
_NULL = struct.pack("!i", -1)


class UUIDArray(list[uuid.UUID | None]):
    """A list of UUIDs (or None) to be sent as a binary ``uuid[]``."""


def _element(value: Any) -> bytes:
    if value is None:
        return _NULL
    if type(value) is not uuid.UUID:
        # Text or a UUID subclass: read as a UUID, as the server would read its text.
        try:
            value = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
        except ValueError:
            raise psycopg.DataError(f"invalid input syntax for type uuid: {value!r}") from None
    return _SIXTEEN + value.bytes


class UUIDArrayBinaryDumper(Dumper):
    format = Format.BINARY
    oid = UUID_ARRAY_OID

    def dump(self, obj: Any) -> bytes:
        if not obj:
            return _EMPTY
        if all(type(value) is uuid.UUID for value in obj):
            head = _HEADER.pack(1, 0, UUID_OID, len(obj), 1)
            return head + _SIXTEEN + _SIXTEEN.join([value.bytes for value in obj])
        head = _HEADER.pack(1, int(None in obj), UUID_OID, len(obj), 1)
        return head + b"".join([_element(value) for value in obj])


# Every psycopg connection (the store's pools, Django's) sends a UUIDArray this way.
psycopg.adapters.register_dumper(UUIDArray, UUIDArrayBinaryDumper)
