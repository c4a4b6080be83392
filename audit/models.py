"""The audit trail: who did what to which thing, appended and never rewritten."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models.functions import Now

from tenancy.models import Org


class AuditEntry(models.Model):
    """One thing that happened in a tenant. The everyday and system logins may only add rows."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    org = models.ForeignKey(Org, on_delete=models.PROTECT, related_name="+")
    # A user id, or the system user (the empty UUID) for work and maintenance.
    actor_id = models.UUIDField()
    action = models.CharField(max_length=100)
    subject_type = models.CharField(max_length=100)
    subject_id = models.CharField(max_length=100)
    data = models.JSONField(default=dict, blank=True)
    request_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now(), editable=False)

    class Meta:
        verbose_name_plural = "audit entries"
        indexes = [models.Index(fields=["org", "subject_type", "subject_id"])]

    def __str__(self) -> str:
        return f"{self.action} {self.subject_type}:{self.subject_id}"
