"""What outside input may be stored, checked before any statement runs.

Every value that reaches SQL or JSON from a caller is checked here (or, for payloads, in
``kinds.validate_payload``) and refused with ``InvalidPayload`` naming the field: nothing is
stored and the caller's transaction stays usable. Texts a handler or the database produces
(error messages) are made storable instead of refused: a settle must never fail on them.
"""

from __future__ import annotations

import math
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from workqueue.exceptions import InvalidPayload

# Kind and lane names: letters, digits and _ . : - (they travel in NOTIFY payloads and logs).
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.:-]+")
KIND_MAX = 100  # WorkItem.kind
LANE_MAX = 50  # WorkItem.lane
KEY_MAX = 200  # WorkItem.idempotency_key
ERROR_MAX = 10_000  # characters of an error kept on the item
TRACEBACK_MAX = 8_192  # characters of a failure's traceback kept with its attempt (its end)
SMALLINT = (-32768, 32767)
MAX_ATTEMPTS_MAX = 1000  # the most a kind may declare (kinds.Kind)
# The deepest a payload may nest lists and objects (a task's arguments too): deeper is refused
# by name, so no caller's value can exhaust the stack of the code that validates or writes it.
PAYLOAD_DEPTH_MAX = 64
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def check_name(field: str, value: Any, max_length: int) -> str:
    """A kind or lane name, or ``InvalidPayload`` saying what a name may be."""
    if not isinstance(value, str) or not value:
        raise InvalidPayload(f"{field}: must be a non-empty string")
    if len(value) > max_length or not NAME_PATTERN.fullmatch(value):
        raise InvalidPayload(
            f"{field}: must be 1 to {max_length} letters, digits or _ . : - (got {value[:60]!r})"
        )
    return value


def check_lane(value: Any, field: str = "lane") -> str:
    return check_name(field, value, LANE_MAX)


# Idempotency keys the queue's own producers make: a schedule keys each tick's item
# ``schedule:<name>:<tick>`` (workers/schedules.py). The API refuses them, so no member can take
# a tick's key first and so replace or suppress a scheduled item of their tenant.
SCHEDULE_KEY_PREFIX = "schedule:"


def check_caller_key(value: Any, field: str = "idempotency_key") -> Any:
    """A caller's item key (the API's body), refused when it is one the schedules make."""
    if isinstance(value, str) and value.startswith(SCHEDULE_KEY_PREFIX):
        raise InvalidPayload(
            f"{field}: keys beginning {SCHEDULE_KEY_PREFIX!r} are the schedules' own"
        )
    return value


def check_text(field: str, value: Any, max_length: int) -> str:
    """A caller's string that will be stored as is: 1 to ``max_length`` characters, no NUL
    (PostgreSQL text cannot hold it), valid Unicode (no lone surrogates)."""
    if not isinstance(value, str) or not value:
        raise InvalidPayload(f"{field}: must be a non-empty string")
    if len(value) > max_length:
        raise InvalidPayload(f"{field}: must be at most {max_length} characters")
    if "\x00" in value:
        raise InvalidPayload(f"{field}: must not contain a NUL character")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidPayload(f"{field}: must be valid Unicode (a lone surrogate)") from None
    return value


def check_id(value: Any, field: str = "id") -> uuid.UUID:
    """An item id: a UUID, or a string that is one."""
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise InvalidPayload(f"{field}: must be a UUID")


def check_priority(value: Any, field: str = "priority") -> int:
    low, high = SMALLINT
    if type(value) is not int or not low <= value <= high:
        raise InvalidPayload(f"{field}: must be an integer from {low} to {high}")
    return value


def check_max_attempts(value: Any, field: str = "max_attempts") -> int:
    """How many times an item may be claimed: 1 to 1000, as a kind may declare."""
    if type(value) is not int or not 1 <= value <= MAX_ATTEMPTS_MAX:
        raise InvalidPayload(f"{field}: must be an integer from 1 to {MAX_ATTEMPTS_MAX}")
    return value


def is_aware(value: object) -> bool:
    """Whether ``value`` is a datetime with a time zone."""
    return isinstance(value, datetime) and value.tzinfo is not None


def check_when(value: Any, field: str = "available_at") -> datetime | None:
    """A moment, as UTC: an offset of seconds (``+00:00:00.000001``) written into the batch's
    JSON is text PostgreSQL refuses, and a moment whose UTC date leaves years 1-9999 is one
    Python cannot read back."""
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidPayload(f"{field}: must be a datetime with a time zone")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidPayload(f"{field}: must fall in the years 1 to 9999 (UTC)") from None


def check_traceparent(value: str | None) -> str | None:
    """A W3C traceparent to record, or None: a malformed one is dropped, never stored."""
    return value if value and _TRACEPARENT.fullmatch(value) else None


def storable_text(said: object, limit: int = ERROR_MAX) -> str:
    """What a handler said (its ``repr`` if no text) as PostgreSQL can store it: NUL and lone
    surrogates replaced, at most ``limit`` characters. It must never stop a settle."""
    text = said if isinstance(said, str) else repr(said)
    text = text[:limit].replace("\x00", "\ufffd")
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def storable_traceback(said: object, limit: int = TRACEBACK_MAX) -> str:
    """A traceback as ``storable_text`` makes it, keeping its last ``limit`` characters (the
    end names the error and where it was raised) behind a line saying how much was cut."""
    if not said:
        return ""
    text = said if isinstance(said, str) else repr(said)
    if len(text) > limit:
        cut = len(text) - limit
        text = f"[{cut} characters cut]\n" + text[-limit:]
    return storable_text(text, limit + 40)


# How many levels of a too-deep value's path its message names.
_NAMED_LEVELS = 2


def _child_path(path: str, key: Any) -> str:
    return f"{path}.{key}" if isinstance(key, str) else f"{path}[{key!r}]"


def _children(value: Any, path: str) -> list[tuple[Any, str]]:
    if isinstance(value, dict):
        return [(item, _child_path(path, key)) for key, item in value.items()]
    if isinstance(value, list | tuple):
        return [(item, f"{path}[{i}]") for i, item in enumerate(value)]
    return []


def too_deep(value: Any, path: str = "payload", limit: int = PAYLOAD_DEPTH_MAX) -> str | None:
    """Where ``value`` nests lists and objects more than ``limit`` levels deep, as
    ``path: reason`` (the path of the field it starts in: the full one would be ``limit`` steps
    long); None when it does not. A walk with its own stack, not recursion, so no value can
    exhaust the interpreter's (a payload nested 10,000 deep is refused, not a crash)."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if not isinstance(item, dict | list | tuple):
            continue
        if depth >= limit:
            return f"{where}: nested more than {limit} levels deep (lists and objects)"
        if depth >= _NAMED_LEVELS:  # below the named field, the path stays the field's
            stack.extend((child, where, depth + 1) for child, _ in _children(item, where))
        else:
            stack.extend((child, at, depth + 1) for child, at in _children(item, where))
    return None


def may_be_too_deep(text: str | bytes, limit: int = PAYLOAD_DEPTH_MAX) -> bool:
    """Whether JSON ``text`` could nest more than ``limit`` deep: it opens more lists and
    objects than that (counted in C; a bracket inside a string only sends it to the walk)."""
    if isinstance(text, str):
        return text.count("[") + text.count("{") > limit
    return text.count(b"[") + text.count(b"{") > limit


def find_unstorable(value: Any, path: str = "payload") -> str | None:
    """Where in a JSON-like value something PostgreSQL's jsonb cannot hold sits (NaN or an
    infinity, a NUL character, a lone surrogate, nesting deeper than ``PAYLOAD_DEPTH_MAX``), as
    ``path: reason``; None when nothing does. Walks the value with its own stack (never
    recursion); callers walk it only when the fast checks on its JSON text found a suspect."""
    if problem := too_deep(value, path):
        return problem
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return f"{where}: NaN and infinity cannot be stored (JSON has no such numbers)"
        if isinstance(item, str):
            if problem := _unstorable_text(item, where):
                return problem
            continue
        if isinstance(item, dict):
            for key in item:
                if isinstance(key, str) and (problem := _unstorable_text(key, f"{where} key")):
                    return problem
        # Reversed onto the stack, so the first problem in the value's own order is named.
        stack.extend(reversed(_children(item, where)))
    return None


# What JSON writes as it is (bool is an int), and as a dict's key; and lists, tuples and dicts.
_JSON_SCALARS = (str, int, float, type(None))
_JSON_VALUES = (*_JSON_SCALARS, list, tuple, dict)


def find_not_json(value: Any, path: str) -> str | None:
    """Where in ``value`` the first thing JSON cannot write sits (a set, a model instance, a
    dict key that is a tuple), as ``path: reason`` naming its type; None when there is none.
    Walks with its own stack, below ``PAYLOAD_DEPTH_MAX`` (deeper is ``too_deep``'s)."""
    if problem := too_deep(value, path):
        return problem
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, _JSON_SCALARS):
                    return f"{where}: a key of type {type(key).__name__} is not JSON"
        elif not isinstance(item, _JSON_VALUES):
            return f"{where}: a {type(item).__name__} is not JSON"
        stack.extend(reversed(_children(item, where)))
    return None


def _unstorable_text(value: str, where: str) -> str | None:
    if "\x00" in value:
        return f"{where}: must not contain a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"{where}: must be valid Unicode (a lone surrogate)"
    return None
