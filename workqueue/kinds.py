"""The kinds of work: each declares its payload schema, lane, attempts and retry policy.

A kind is registered once (at import, or from an app's ``ready()``); an enqueue of an unknown
kind, or of a payload that does not fit the kind's schema, is refused before anything is stored.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pydantic
import pydantic_core

from workqueue.exceptions import InvalidPayload
from workqueue.rules import DEFAULT_RETRY, RetryPolicy


class Payload(pydantic.BaseModel):
    """Base of payload schemas: unknown fields are refused, so a typo never enqueues."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


@dataclass(frozen=True)
class Kind:
    name: str
    schema: type[Payload]
    lane: str = "default"
    max_attempts: int = 5
    retry: RetryPolicy = field(default=DEFAULT_RETRY)
    description: str = ""


_KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Add a kind; registering the same name twice with a different definition is a bug."""
    existing = _KINDS.get(kind.name)
    if existing is not None and existing != kind:
        raise ValueError(f"work kind {kind.name} is already registered differently")
    _KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> Kind:
    try:
        return _KINDS[name]
    except KeyError:
        known = ", ".join(sorted(_KINDS)) or "none"
        raise InvalidPayload(f"kind: unknown work kind {name!r} (known: {known})") from None


def known_kinds() -> list[str]:
    return sorted(_KINDS)


def validate_payload(kind: Kind, payload: Any) -> str:
    """The payload as it will be stored (JSON text), or ``InvalidPayload`` naming the field.

    pydantic validates and writes the JSON in one pass; NaN and infinity are refused (jsonb
    has no such numbers), and so is a value of a type JSON cannot hold.
    """
    if not isinstance(payload, dict):
        raise InvalidPayload(f"payload: must be a JSON object, got {type(payload).__name__}")
    try:
        model = kind.schema.model_validate(payload)
        return model.model_dump_json(exclude_none=True)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "payload"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise InvalidPayload(f"payload.{where}: {first['msg']}{more}") from None
    except pydantic_core.PydanticSerializationError as exc:
        raise InvalidPayload(f"payload: not JSON-serialisable ({exc})") from None


# The built-in kinds.


class NoopPayload(Payload):
    """Nothing to do; benchmarks and smoke tests."""

    n: int | None = None
    # Wall-clock time of the enqueue's commit, for latency benchmarks.
    sent_at: float | None = None
    # Seconds to spend "working" (async sleep), for shutdown and lease tests.
    sleep_s: float | None = pydantic.Field(default=None, ge=0, le=3600)


class NotifyShipmentPayload(Payload):
    """Tell the recipient a shipment moved, and advance the shipment's notified version."""

    shipment_id: uuid.UUID
    # The shipment's version this notice is about; the handler's compare-and-set uses it.
    version: int = pydantic.Field(ge=1)
    channel: str = pydantic.Field(default="email", pattern="^(email|sms)$")


NOOP = register(Kind("NOOP", NoopPayload, max_attempts=3, description="does nothing"))
NOTIFY_SHIPMENT = register(
    Kind(
        "NOTIFY_SHIPMENT",
        NotifyShipmentPayload,
        max_attempts=5,
        description="notify a shipment's recipient once per version",
    )
)
