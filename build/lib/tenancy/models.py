"""Tenants (organisations) and their members: the ``orgs`` tenancy (``WORKQUEUE["TENANCY"]``).

Members are the site's own users (``settings.AUTH_USER_MODEL``, whatever its primary key).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models.functions import Cast, Now

from tenancy.contexts import Role
from wqcore.conf import system_alias


class OrgQuerySet(models.QuerySet["Org"]):
    def live(self) -> OrgQuerySet:
        return self.filter(gone_at__isnull=True)


class Org(models.Model):
    """A tenant. Every tenant row names one; an org marked gone keeps its rows but runs no work."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    created_at = models.DateTimeField(db_default=Now(), editable=False)
    # Set when the tenant leaves; the claim fails its work as orphaned instead of running it.
    gone_at = models.DateTimeField(null=True, blank=True)

    objects = OrgQuerySet.as_manager()

    def __str__(self) -> str:
        return self.name

    def mark_gone(self) -> None:
        """Mark the tenant gone, by the database clock. On the system login: the everyday
        login may read its own org but never change one."""
        Org.objects.using(system_alias()).filter(pk=self.pk).update(gone_at=Now())
        self.refresh_from_db(using=system_alias(), fields=["gone_at"])


class Membership(models.Model):
    """A user's place in an org. A member who leaves keeps the row, with ``ended_at`` set."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workqueue_memberships"
    )
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(db_default=Now(), editable=False)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "user"], name="membership_one_per_org"),
            models.CheckConstraint(
                condition=~models.Q(role="service"), name="membership_role_not_service"
            ),
        ]
        indexes = [
            # The claim finds each item's author by the text its created_by holds (an actor is
            # the user's primary key as text, whatever the user model's key type).
            models.Index("org", Cast("user_id", models.TextField()), name="membership_actor_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.org_id} as {self.role}"
