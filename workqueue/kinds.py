"""Kinds of work: each declares its payload schema, lane, attempts, retry policy and time limit.

The queue registers and validates kinds but names none: a worker package declares its kind
beside its handler (``workers/<worker>/kind.py``). An enqueue of an unknown kind, or of a
payload that does not fit the kind's schema, is refused before anything is stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, cast

import pydantic
import pydantic_core

from workqueue.exceptions import InvalidPayload
from workqueue.inputs import (
    KIND_MAX,
    PAYLOAD_DEPTH_MAX,
    check_lane,
    check_name,
    find_unstorable,
    may_be_too_deep,
    too_deep,
)
from workqueue.rules import DEFAULT_RETRY, RetryPolicy
from wqcore.conf import wq_settings

# The longest time limit a kind may declare (a week): longer work is a schedule of shorter runs.
MAX_TIMEOUT_S = 7 * 86_400


class Payload(pydantic.BaseModel):
    """Base of payload schemas: unknown fields are refused, so a typo never enqueues.

    NaN and infinity are refused in typed float fields; in free-form fields (``dict``,
    ``Any``) they are written as the bare tokens ``NaN``/``Infinity`` so that the check on the
    JSON text finds and refuses them too (``validate_payload``).
    """

    model_config = pydantic.ConfigDict(
        extra="forbid", frozen=True, allow_inf_nan=False, ser_json_inf_nan="constants"
    )


@dataclass(frozen=True)
class Kind:
    name: str
    schema: type[Payload]
    lane: str = "default"
    max_attempts: int = 5
    retry: RetryPolicy = field(default=DEFAULT_RETRY)
    description: str = ""
    # The longest a handler of this kind runs, in seconds: past it, it is cancelled and the
    # item fails as TimeoutError. None: the site's default (WORKQUEUE["KIND_TIMEOUT_S"]); 0: no
    # limit.
    timeout: float | None = None
    # The most of the kind's items claimed at once in a lane, across every worker and tenant
    # (a kind lives in its lane, so that is its global cap); None: no cap of its own. Enforced
    # by the claim statement, whose claims of a capped lane run one at a time.
    max_running: int | None = None
    # The payload's fields that name a person (an e-mail address, a name): what
    # ``manage.py queue erase --subject FIELD=VALUE`` redacts in the items that carry VALUE.
    personal: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Refused where it is declared, not at every enqueue: a name the column cannot hold
        # would make every enqueue of the kind fail.
        try:
            check_name("kind", self.name, KIND_MAX)
            check_lane(self.lane, "lane")
        except InvalidPayload as exc:
            raise ValueError(f"work kind {self.name!r}: {exc}") from None
        if not _whole_in(self.max_attempts, 1, 1000):
            raise ValueError(f"work kind {self.name!r}: max_attempts must be 1 to 1000")
        if self.max_running is not None and not _whole_in(self.max_running, 1, 100_000):
            raise ValueError(f"work kind {self.name!r}: max_running must be 1 to 100000 or None")
        if not _payload_class(self.schema):
            raise ValueError(f"work kind {self.name!r}: schema must be a Payload subclass")
        fields, personal = self.schema.model_fields, cast(object, self.personal)
        if not isinstance(personal, tuple) or any(f not in fields for f in personal):
            raise ValueError(
                f"work kind {self.name!r}: personal must be a tuple of the schema's fields "
                f"(got {self.personal!r}; fields: {', '.join(fields) or 'none'})"
            )
        if self.timeout is not None and not _number_in(self.timeout, 0, MAX_TIMEOUT_S):
            raise ValueError(
                f"work kind {self.name!r}: timeout must be 0 (no limit) to {MAX_TIMEOUT_S} "
                f"seconds, or None for WORKQUEUE['KIND_TIMEOUT_S'] (got {self.timeout!r})"
            )

    def time_limit_s(self) -> float | None:
        """The seconds a handler of this kind may run (None: no limit): its own ``timeout``,
        else the site's ``KIND_TIMEOUT_S``; 0 means no limit."""
        limit = self.timeout if self.timeout is not None else wq_settings.KIND_TIMEOUT_S
        return float(limit) if limit else None


# A kind's fields as declared, checked as values of any type: a dataclass does not check the
# types its fields are annotated with.
def _whole_in(value: object, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _number_in(value: object, low: float, high: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high


def _payload_class(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, Payload)


_KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Add a kind; registering the same name twice with a different definition is a bug."""
    existing = _KINDS.get(kind.name)
    if existing is not None and existing != kind:
        raise ValueError(f"work kind {kind.name} is already registered differently")
    _KINDS[kind.name] = kind
    return kind


def get_kind(name: Any) -> Kind:
    try:
        return _KINDS[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(_KINDS)) or "none"
        shown = name[:60] if isinstance(name, str) else name
        raise InvalidPayload(f"kind: unknown work kind {shown!r} (known: {known})") from None


def known_kinds() -> list[str]:
    return sorted(_KINDS)


def all_kinds() -> list[Kind]:
    return [_KINDS[name] for name in sorted(_KINDS)]


def max_payload_bytes() -> int:
    return wq_settings.MAX_PAYLOAD_BYTES


# What in a payload's JSON text may be something jsonb cannot hold (see validate_payload): NaN,
# an infinity, an escaped NUL, a replacement character (UTF-8 EF BF BD). One scan of the text.
_SUSPECT = re.compile(rb"NaN|Infinity|\\u0000|\xef\xbf\xbd")


def validate_payload(kind: Kind, payload: Any) -> str:
    """The payload as it will be stored (JSON text), or ``InvalidPayload`` naming the field.

    pydantic validates and writes the JSON in one pass. Then the text is checked for what
    jsonb cannot hold (NaN, infinity, NUL, lone surrogates: a walk of the value names the
    field, and runs only when a fast scan of the text finds a suspect, a replacement character
    among them), for nesting deeper than ``PAYLOAD_DEPTH_MAX`` (walked only when the text opens
    more lists and objects than that), and for its size.
    """
    if not isinstance(payload, dict):
        raise InvalidPayload(f"payload: must be a JSON object, got {type(payload).__name__}")
    schema = kind.schema
    try:
        # What model_validate and model_dump_json run, without their per-call wrapping (a bulk
        # enqueue validates every item of its batch here).
        model = schema.__pydantic_validator__.validate_python(payload)
        raw: bytes = schema.__pydantic_serializer__.to_json(model, exclude_none=True)
    except pydantic.ValidationError as exc:
        raise InvalidPayload(_every_error(exc)) from None
    except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
        unstorable = find_unstorable(payload) or f"payload: not JSON-serialisable ({exc})"
        raise InvalidPayload(unstorable) from None
    except RecursionError:
        # pydantic walks a value by recursion: one nested thousands deep exhausts the stack.
        deep = too_deep(payload) or f"payload: nested more than {PAYLOAD_DEPTH_MAX} deep"
        raise InvalidPayload(deep) from None
    if may_be_too_deep(raw) and (problem := too_deep(payload)):
        raise InvalidPayload(problem)
    # U+FFFD (UTF-8 EF BF BD): pydantic writes a lone surrogate in a typed dict's key
    # (``dict[str, Any]``) as replacement characters instead of refusing it, so the text alone
    # looks fine.
    if _SUSPECT.search(raw) is not None and (
        problem := find_unstorable(model.model_dump(exclude_none=True))
    ):
        raise InvalidPayload(problem)
    limit = max_payload_bytes()
    if len(raw) > limit:
        raise InvalidPayload(
            f"payload: {len(raw)} bytes is more than the {limit} allowed "
            "(WORKQUEUE['MAX_PAYLOAD_BYTES'])"
        )
    return raw.decode()


def _every_error(exc: pydantic.ValidationError) -> str:
    """Each of pydantic's errors as ``payload.<where>: <why>``, all of them (a caller fixes
    them in one go), joined by ``; ``."""
    said = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        said.append(f"payload{'.' + where if where else ''}: {error['msg']}")
    return "; ".join(said)
