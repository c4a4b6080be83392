"""The contexts an operation runs under.

A ``RequestContext`` says where a call came from (one per web request, per claim, per sweep
pass); an ``OpContext`` says for whom it acts: the tenant, the actor, the role, and the request
that caused it.

An actor is recorded as text: the site's user's primary key (``str(user.pk)``, whatever the user
model and the type of its key), or ``SYSTEM_ACTOR`` for the queue's own bookkeeping and for
work no person owns. Every column that names an actor (an item's author, an audit entry's
actor, an outbox row's) holds that text.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from django.db import models

from wqcore.actor import SYSTEM_ACTOR

__all__ = ["SYSTEM_ACTOR", "AppContext", "AppType", "OpContext", "RequestContext", "Role"]


def actor_of(user: Any) -> str:
    """The actor text of a signed-in user (or of a primary key); ``SYSTEM_ACTOR`` for none."""
    if user is None:
        return SYSTEM_ACTOR
    pk = getattr(user, "pk", user)
    return SYSTEM_ACTOR if pk is None else str(pk)


class Role(models.TextChoices):
    # Runs everything in its org; may manage members.
    OWNER = "owner", "Owner"
    # Triage and operations in its org.
    ADMIN = "admin", "Admin"
    # Everyday use.
    MEMBER = "member", "Member"
    # Reserved for services (workers, the sweep): never granted to a person.
    SERVICE = "service", "Service"


class AppType(StrEnum):
    WEB = "web"
    WORKER = "worker"
    SWEEP = "sweep"
    CLI = "cli"


@dataclass(frozen=True)
class AppContext:
    type: AppType
    version: str


@dataclass(frozen=True)
class RequestContext:
    """Where a call came from: its request id, its trace, and the process kind that made it."""

    app: AppContext
    request_id: uuid.UUID = field(default_factory=uuid.uuid4)
    traceparent: str | None = None


@dataclass(frozen=True)
class OpContext:
    """For whom an operation acts: the tenant every write and read is scoped to, and the actor
    (``user_id``: the user's primary key as text, or ``SYSTEM_ACTOR``)."""

    org_id: uuid.UUID
    user_id: str
    role: Role
    rctx: RequestContext
    # The request that caused this operation (for work, the request that enqueued it).
    caused_by_request_id: uuid.UUID | None = None

    def __post_init__(self) -> None:
        # An actor is text, whatever the type of the user model's key it was made from (an
        # untyped caller may pass the key itself).
        given: object = self.user_id
        if not isinstance(given, str):
            object.__setattr__(self, "user_id", actor_of(given))

    @property
    def request_id(self) -> uuid.UUID:
        return self.rctx.request_id


def service_context(rctx: RequestContext, org_id: uuid.UUID) -> OpContext:
    """The tenant's service context: the service role and the system actor."""
    return OpContext(org_id=org_id, user_id=SYSTEM_ACTOR, role=Role.SERVICE, rctx=rctx)


def contexts_from_rows(
    rctx: RequestContext, rows: Iterable[Sequence[Any]]
) -> dict[tuple[uuid.UUID, str], OpContext | None]:
    """Contexts from ``(org_id, actor, live, role)`` rows (what the claim's lookup returns): the
    author's while they hold a role, else the tenant's service context; None where the tenant
    is gone."""
    found: dict[tuple[uuid.UUID, str], OpContext | None] = {}
    for org_id, actor, live, role in rows:
        if (org_id, actor) in found:  # a claim's rows repeat a few authors many times
            continue
        if not live:
            found[(org_id, actor)] = None
        elif actor == SYSTEM_ACTOR or role is None:
            found[(org_id, actor)] = service_context(rctx, org_id)
        else:
            found[(org_id, actor)] = OpContext(
                org_id=org_id, user_id=actor, role=Role(role), rctx=rctx
            )
    return found


def release() -> str:
    """The release this process runs: ``settings.RELEASE``, or "dev" when the site names none."""
    from django.conf import settings

    return str(getattr(settings, "RELEASE", None) or "dev")


def new_request_context(app_type: AppType, traceparent: str | None = None) -> RequestContext:
    """A fresh ``RequestContext`` for this process kind, stamped with the release."""
    return RequestContext(
        app=AppContext(app_type, f"{app_type.value}@{release()}"), traceparent=traceparent
    )
