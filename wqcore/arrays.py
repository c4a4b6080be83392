"""Lists sent to the server as binary PostgreSQL arrays, in one pass.

psycopg sends a ``list`` parameter in text, element by element in Python (each value written,
then searched for characters to quote): for the batch completion's three lists of a hundred ids
that was the worker's largest cost per item, and a large share of a bulk enqueue, whose every
column is a list as long as the batch. A list wrapped in one of these classes is dumped as
PostgreSQL's binary array instead (a header, then each element's length and bytes), in a few
joins:

- ``UUIDArray``: ``uuid[]`` (statements wrap their ``list[uuid.UUID]`` parameters in it:
  ``wqcore.statements.Statement.bind_native``);
- ``TextArray``: ``text[]``, ``SmallIntArray``: ``smallint[]``, ``IntArray``: ``integer[]``,
  ``BoolArray``: ``boolean[]``, ``TimestamptzArray``: ``timestamptz[]`` of aware datetimes (a
  bulk enqueue's columns).

Each may hold None (NULL). A column whose values are all the same (a batch's kind, lane,
priority) is written once and repeated.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

# ndim, has-null flag, element type; then per dimension its length and lower bound.
_HEADER = struct.Struct("!iiIii")
_LENGTH = struct.Struct("!i").pack
_NULL = _LENGTH(-1)
# PostgreSQL's timestamps count microseconds from 2000-01-01 UTC.
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


class UUIDArray(list[uuid.UUID | None]):
    """A list of UUIDs (or None) to be sent as a binary ``uuid[]``."""

    sql_type = "uuid[]"


class TextArray(list[str | None]):
    """A list of strings (or None) to be sent as a binary ``text[]``."""

    sql_type = "text[]"


class SmallIntArray(list[int | None]):
    """A list of ints (or None) to be sent as a binary ``smallint[]``."""

    sql_type = "smallint[]"


class IntArray(list[int | None]):
    """A list of ints (or None) to be sent as a binary ``integer[]``."""

    sql_type = "integer[]"


class BoolArray(list[bool | None]):
    """A list of booleans (or None) to be sent as a binary ``boolean[]``."""

    sql_type = "boolean[]"


class TimestamptzArray(list[datetime | None]):
    """A list of aware datetimes (or None) to be sent as a binary ``timestamptz[]``."""

    sql_type = "timestamptz[]"


# Any of them (a bulk enqueue's column is sent as one).
BinaryArray = UUIDArray | TextArray | SmallIntArray | IntArray | BoolArray | TimestamptzArray


def _uuid(value: object) -> bytes:
    if not isinstance(value, uuid.UUID):
        # Text: read as a UUID, as the server would read its text.
        try:
            value = uuid.UUID(str(value))
        except ValueError:
            raise psycopg.DataError(f"invalid input syntax for type uuid: {value!r}") from None
    return _LENGTH(16) + value.bytes


def _text(value: str) -> bytes:
    data = value.encode()
    return _LENGTH(len(data)) + data


def _int(size: int) -> Callable[[int], bytes]:
    packed = struct.Struct("!ih" if size == 2 else "!ii").pack
    return lambda value: packed(size, value)


_TRUE, _FALSE = _LENGTH(1) + b"\x01", _LENGTH(1) + b"\x00"


def _bool(value: bool) -> bytes:
    return _TRUE if value else _FALSE


def _timestamptz(value: datetime) -> bytes:
    if value.tzinfo is None:
        raise psycopg.DataError(f"a timestamptz needs a time zone: {value!r}")
    return struct.pack("!iq", 8, (value - _PG_EPOCH) // _MICROSECOND)


def _array(oid: int, element: Callable[[Any], bytes], values: list[Any]) -> bytes:
    if not values:
        return struct.pack("!iiI", 0, 0, oid)
    head = _HEADER.pack(1, int(None in values), oid, len(values), 1)
    first = values[0]
    if values.count(first) == len(values):
        return head + (_NULL if first is None else element(first)) * len(values)
    return head + b"".join([_NULL if v is None else element(v) for v in values])


def _dumper(cls: type, array_oid: int, oid: int, element: Callable[[Any], bytes]) -> None:
    class ArrayDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: Any) -> bytes:
            return _array(oid, element, obj)

    ArrayDumper.oid = array_oid
    ArrayDumper.__name__ = ArrayDumper.__qualname__ = f"{cls.__name__}BinaryDumper"
    # Every psycopg connection (the store's pools, Django's) sends the class this way.
    psycopg.adapters.register_dumper(cls, ArrayDumper)


class UUIDArrayBinaryDumper(Dumper):
    """``uuid[]``: 16 bytes an element; a list of plain UUIDs (the usual case) in one join."""

    format = Format.BINARY
    oid = 2951

    def dump(self, obj: Any) -> bytes:
        if obj and all(type(value) is uuid.UUID for value in obj):
            sixteen = _LENGTH(16)
            head = _HEADER.pack(1, 0, 2950, len(obj), 1)
            return head + sixteen + sixteen.join([value.bytes for value in obj])
        return _array(2950, _uuid, obj)


psycopg.adapters.register_dumper(UUIDArray, UUIDArrayBinaryDumper)
_dumper(TextArray, 1009, 25, _text)
_dumper(SmallIntArray, 1005, 21, _int(2))
_dumper(IntArray, 1007, 23, _int(4))
_dumper(BoolArray, 1000, 16, _bool)
_dumper(TimestamptzArray, 1185, 1184, _timestamptz)
