"""Tenants (organisations), their members, and the user model."""

from __future__ import annotations

import uuid

from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models.functions import Now


class User(AbstractUser):
    """A person who signs in. UUID ids, so the system user can be the empty UUID."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)


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
        from tenancy.scope import SYSTEM_ALIAS

        Org.objects.using(SYSTEM_ALIAS).filter(pk=self.pk).update(gone_at=Now())
        self.refresh_from_db(using=SYSTEM_ALIAS, fields=["gone_at"])


class Role(models.TextChoices):
    # Runs everything in its org; may manage members.
    OWNER = "owner", "Owner"
    # Triage and operations in its org.
    ADMIN = "admin", "Admin"
    # Everyday use.
    MEMBER = "member", "Member"
    # Reserved for services (workers, the sweep): never granted to a person.
    SERVICE = "service", "Service"


class Membership(models.Model):
    """A user's place in an org. A member who leaves keeps the row, with ``ended_at`` set."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
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

    def __str__(self) -> str:
        return f"{self.user_id} in {self.org_id} as {self.role}"
