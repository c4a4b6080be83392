"""Appending to the audit trail."""

from __future__ import annotations

from typing import Any

from django.db import models

from audit.models import AuditEntry
from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope

Subject = models.Model | tuple[str, object]


def _subject(subject: Subject) -> tuple[str, str]:
    if isinstance(subject, models.Model):
        return subject._meta.label_lower, str(subject.pk)
    kind, ident = subject
    return kind, str(ident)


def append(
    ctx: OpContext, action: str, subject: Subject, data: dict[str, Any] | None = None
) -> AuditEntry:
    """Append one entry in the context's tenant, signed by its user and request.

    Joins the caller's transaction when there is one, so the entry lands with the change it
    records or not at all.
    """
    subject_type, subject_id = _subject(subject)
    with tenant_scope(ctx.org_id) as using:
        return AuditEntry.objects.using(using).create(
            org_id=ctx.org_id,
            actor_id=ctx.user_id,
            action=action,
            subject_type=subject_type,
            subject_id=subject_id,
            data=data or {},
            request_id=ctx.request_id,
        )
