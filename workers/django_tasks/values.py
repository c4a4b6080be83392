"""What a task may take and return: JSON values, as Django requires, that PostgreSQL can store.

Django's ``normalize_json`` turns tuples into lists and UTF-8 bytes into text, and refuses
anything else. The walk here does the same (and writes a key that is not text as JSON writes
it, so the task gets what it would from any JSON store), refuses what ``jsonb`` cannot hold (NaN,
infinity, NUL, lone surrogates), and says where the first problem sits (``args[1]['when']``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from workqueue.runtime import PAYLOAD_DEPTH_MAX, max_payload_bytes

# The most levels of lists and objects an argument may nest: the payload's own limit less the
# two levels an argument sits in (the payload object and its ``args`` list or ``kwargs``).
MAX_DEPTH = PAYLOAD_DEPTH_MAX - 2
_KEY_TYPES = (str, int, float, bool, type(None))
_HINT = "use str, int, float, bool, None, lists or dicts of them (an id, not a model instance)"


def _too_deep(where: str, depth: int) -> None:
    # Checked before going down, so no caller's value can exhaust the interpreter's stack.
    if depth >= MAX_DEPTH:
        raise ValueError(f"{where}: nested more than {MAX_DEPTH} levels deep (lists and dicts)")


def _normalized(value: Any, where: str, depth: int) -> Any:
    match value:
        case str():
            if "\x00" in value:
                raise ValueError(f"{where}: must not contain a NUL character")
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError(f"{where}: must be valid Unicode (a lone surrogate)") from None
            return value
        case float() if not math.isfinite(value):
            raise ValueError(
                f"{where}: NaN and infinity cannot be stored (JSON has no such numbers)"
            )
        case bool() | int() | float() | None:
            return value
        case bytes():
            try:
                text = value.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{where}: bytes that are not UTF-8 are not JSON") from None
            return _normalized(text, where, depth)  # the text may hold a NUL
        case Mapping():
            _too_deep(where, depth)
            out = {}
            for key, item in value.items():
                if not isinstance(key, _KEY_TYPES):
                    raise TypeError(f"{where}: the key {key!r} is a {type(key).__name__}; {_HINT}")
                _normalized(key, f"{where} key {str(key)[:40]!r}", depth + 1)
                # As JSON names it (None: "null", True: "true"), not as str() would.
                name = key if isinstance(key, str) else json.dumps(key)
                out[name] = _normalized(item, f"{where}[{key!r}]", depth + 1)
            return out
        case Sequence():  # str and bytes are handled above
            _too_deep(where, depth)
            return [_normalized(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
        case _:
            raise TypeError(f"{where}: a {type(value).__name__} is not JSON; {_HINT}")


def json_value(value: Any, where: str) -> Any:
    """``value`` as JSON values (tuples as lists, bytes as text), or ``TypeError`` (not JSON)
    / ``ValueError`` (JSON that cannot be stored) naming where in it the problem is."""
    return _normalized(value, where, 0)


def json_arguments(
    args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """A task's arguments as JSON values, or an error naming the first that is not one."""
    for name in kwargs:  # a keyword's name is stored too: a key of the payload's kwargs
        json_value(name, f"kwargs[{name!r}]")
    return (
        [json_value(v, f"args[{i}]") for i, v in enumerate(args)],
        {k: json_value(v, f"kwargs[{k!r}]") for k, v in kwargs.items()},
    )


def json_text(value: Any, where: str) -> str:
    """``value`` (already JSON values) as JSON text, within the queue's payload size limit
    (``WORKQUEUE["MAX_PAYLOAD_BYTES"]``), or ``ValueError``."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    size, limit = len(text.encode("utf-8")), max_payload_bytes()
    if size > limit:
        raise ValueError(
            f"{where}: {size} bytes of JSON is more than the {limit} allowed "
            "(WORKQUEUE['MAX_PAYLOAD_BYTES'])"
        )
    return text
