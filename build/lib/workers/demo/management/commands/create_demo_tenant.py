"""manage.py create_demo_tenant: the reference site's demo org with an admin user (the orgs
tenancy), and its stable password."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from tenancy.contexts import Role
from tenancy.models import Membership, Org
from tenancy.scope import tenant_scope
from wqcore.conf import owner_alias

# Where the demo password is kept between runs (git-ignored): a second bin/run, or a restart,
# keeps the password a first one printed (and a browser may have saved).
PASSWORD_FILE = ".demo-password"


def demo_password(path: Path) -> str:
    """DEMO_PASSWORD when set, else the one kept in ``path``, else a new one kept there."""
    given = os.environ.get("DEMO_PASSWORD", "")
    if given:
        return given
    try:
        kept = path.read_text().strip()
    except FileNotFoundError:
        kept = ""
    if kept:
        return kept
    password = secrets.token_urlsafe(12)
    # Readable by this user only: it signs in as a superuser.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(password + "\n")
    return password


class Command(BaseCommand):
    help = (
        "Create the demo tenant (org 'demo') and its admin user (staff and superuser in the "
        "Django admin, owner of the org) if missing, and print the login. The password is "
        "DEMO_PASSWORD, else the one kept in .demo-password (made on first use), so running "
        "this again never changes it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin", help="the admin's username")
        parser.add_argument("--org", default="demo", help="the demo org's slug")
        parser.add_argument(
            "--password-file",
            default=str(Path(settings.BASE_DIR) / PASSWORD_FILE),
            help="where the password is kept between runs (default: .demo-password)",
        )

    def handle(
        self, *args: Any, username: str, org: str, password_file: str, **options: Any
    ) -> None:
        password = demo_password(Path(password_file))
        owner = owner_alias()
        User = get_user_model()
        # Orgs, users and memberships are set up as the owner: no tenant exists to scope to yet.
        with transaction.atomic(using=owner):
            tenant, _ = Org.objects.using(owner).get_or_create(
                slug=org, defaults={"name": org.title()}
            )
            user, _ = User.objects.using(owner).get_or_create(
                username=username, defaults={"is_staff": True, "is_superuser": True}
            )
            if not (user.is_staff and user.is_superuser and user.check_password(password)):
                user.is_staff = user.is_superuser = True
                user.set_password(password)
                user.save(using=owner)
            # The membership is a tenant row. FORCE makes a table's owner obey its policy, so an
            # owner login that is not a superuser may insert it only under the tenant's scope;
            # a superuser owner (the default, postgres) bypasses row-level security anyway.
            with tenant_scope(tenant.pk, using=owner):
                Membership.objects.using(owner).get_or_create(
                    org=tenant, user=user, defaults={"role": Role.OWNER}
                )
        self.stdout.write(f"demo tenant {tenant.slug} ({tenant.pk})")
        self.stdout.write(f"admin user: {username}  password: {password}")
