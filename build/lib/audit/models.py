"""The audit trail: who did what to which thing, appended and never rewritten."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models.functions import Now


class AuditEntry(models.Model):
    """One thing that happened in a tenant. The everyday and system logins may only add rows."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # The tenant: row-level security pins it to the one the transaction names.
    org_id = models.UUIDField()
    # Who: a user's primary key as text, or the system actor (tenancy.contexts.SYSTEM_ACTOR).
    actor = models.CharField(max_length=255)
    action = models.CharField(max_length=100)
    subject_type = models.CharField(max_length=100)
    subject_id = models.CharField(max_length=100)
    data = models.JSONField(default=dict, blank=True)
    request_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now(), editable=False)

    class Meta:
        verbose_name_plural = "audit entries"
        indexes = [
            models.Index(
                fields=["org_id", "subject_type", "subject_id"], name="auditentry_subject_idx"
            )
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.subject_type}:{self.subject_id}"
