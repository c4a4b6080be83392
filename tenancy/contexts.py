"""The contexts an operation runs under.

A ``RequestContext`` says where a call came from (one per web request, per claim, per sweep
pass); an ``OpContext`` says for whom it acts: the tenant, the user, the role, and the request
that caused it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import StrEnum

from tenancy.models import Role

# The system user: the author of bookkeeping writes and of work no member owns.
SYSTEM_USER_ID = uuid.UUID(int=0)


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
    """For whom an operation acts: the tenant every write and read is scoped to."""

    org_id: uuid.UUID
    user_id: uuid.UUID
    role: Role
    rctx: RequestContext
    # The request that caused this operation (for work, the request that enqueued it).
    caused_by_request_id: uuid.UUID | None = None

    @property
    def request_id(self) -> uuid.UUID:
        return self.rctx.request_id


def new_request_context(app_type: AppType, traceparent: str | None = None) -> RequestContext:
    """A fresh ``RequestContext`` for this process kind, stamped with the release."""
    from django.conf import settings

    version = f"{app_type.value}@{settings.RELEASE}"
    return RequestContext(app=AppContext(app_type, version), traceparent=traceparent)
