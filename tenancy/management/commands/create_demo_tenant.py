"""manage.py create_demo_tenant: a demo org with an admin user, printing its password."""

from __future__ import annotations

import secrets
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from tenancy.models import Membership, Org, Role, User
from tenancy.scope import tenant_scope


class Command(BaseCommand):
    help = (
        "Create the demo tenant (org 'demo') and its admin user (staff and superuser in the "
        "Django admin, owner of the org) if missing, set a fresh password and print it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin", help="the admin's username")
        parser.add_argument("--org", default="demo", help="the demo org's slug")

    def handle(self, *args: Any, username: str, org: str, **options: Any) -> None:
        password = secrets.token_urlsafe(12)
        # Orgs, users and memberships are set up as the owner: no tenant exists to scope to yet.
        with transaction.atomic(using="admin"):
            tenant, _ = Org.objects.using("admin").get_or_create(
                slug=org, defaults={"name": org.title()}
            )
            user, _ = User.objects.using("admin").get_or_create(
                username=username, defaults={"is_staff": True, "is_superuser": True}
            )
            user.is_staff = user.is_superuser = True
            user.set_password(password)
            user.save(using="admin")
            # The membership is a tenant row. FORCE makes a table's owner obey its policy, so an
            # owner login that is not a superuser may insert it only under the tenant's scope;
            # a superuser owner (the default, postgres) bypasses row-level security anyway.
            with tenant_scope(tenant.pk, using="admin"):
                Membership.objects.using("admin").get_or_create(
                    org=tenant, user=user, defaults={"role": Role.OWNER}
                )
        self.stdout.write(f"demo tenant {tenant.slug} ({tenant.pk})")
        self.stdout.write(f"admin user: {username}  password: {password}")
