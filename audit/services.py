"""Appending to the audit trail: from Python (``append``), and inside another app's statement
(``APPEND_ENTRIES``, the one spelling of an entry in SQL)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, NamedTuple

from django.db import models

from audit.models import AuditEntry
from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope
from wqcore.statements import Statement

Subject = models.Model | tuple[str, object]


class AppendEntriesParams(NamedTuple):
    # Who acted (a user's primary key as text, or the system actor) and in which request.
    actor: str
    request_id: uuid.UUID | None


# Included by a statement that audits what it changes: it defines ``entries`` (org_id, action,
# subject_type, subject_id, data) and says ``{append_entries}`` where the INSERT goes.
APPEND_ENTRIES = Statement("append_entries", AppendEntriesParams, Path(__file__).with_name("sql"))

# What a redacted entry's data becomes: the entry's skeleton (who, what, when) stays.
REDACTED = {"redacted": True}


class RedactParams(NamedTuple):
    org_id: uuid.UUID
    # Only the entries of these subjects (None: every entry of the tenant).
    subject_type: str | None
    subject_ids: list[str] | None
    batch: int


class UnredactedParams(NamedTuple):
    org_id: uuid.UUID


# The one way an entry changes (``sql/schema/redact_v1.sql``, the system login's only), and how
# many of a tenant's entries still carry their data.
REDACT_ENTRIES = Statement("redact_entries", RedactParams, Path(__file__).with_name("sql"))
COUNT_UNREDACTED = Statement("count_unredacted", UnredactedParams, Path(__file__).with_name("sql"))


def _subject(subject: Subject) -> tuple[str, str]:
    if isinstance(subject, models.Model):
        return subject._meta.label_lower, str(subject.pk)
    kind, ident = subject
    return kind, str(ident)


def append(
    ctx: OpContext, action: str, subject: Subject, data: dict[str, Any] | None = None
) -> AuditEntry:
    """Append one entry in the context's tenant, signed by its actor and request.

    Joins the caller's transaction when there is one, so the entry lands with the change it
    records or not at all.
    """
    subject_type, subject_id = _subject(subject)
    with tenant_scope(ctx.org_id) as using:
        return AuditEntry.objects.using(using).create(
            org_id=ctx.org_id,
            actor=ctx.user_id,
            action=action,
            subject_type=subject_type,
            subject_id=subject_id,
            data=data or {},
            request_id=ctx.request_id,
        )
