"""Who a ``manage.py queue`` subcommand acts as: ``--user`` names one of the site's active
superusers (the operator), whose primary key signs the audit entries; without it, the system
actor signs them (whoever can run ``manage.py`` on the host already has the operator's reach)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, CommandParser

from audit.api import actor_names
from tenancy.contexts import SYSTEM_ACTOR, actor_of


def add_user_argument(parser: CommandParser) -> None:
    parser.add_argument(
        "--user",
        metavar="USERNAME",
        help="the operator acting (an active superuser; signs the audit entry). "
        "Default: the system actor",
    )


def operator_actor(username: str | None) -> str:
    """The actor of ``username`` (an active superuser), or ``SYSTEM_ACTOR`` when none is given;
    ``CommandError`` for anyone else (a tenant's staff may not pause the site's lanes)."""
    if username is None:
        return SYSTEM_ACTOR
    model = get_user_model()
    # Where the site's sign-in reads its users.
    user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
    if user is None or not user.is_active or not user.is_superuser:
        raise CommandError(f"--user: {username!r} is not an active superuser (the operator)")
    return actor_of(user)


def actor_name(actor: str) -> str:
    """An actor as a person reads it: the user's name, "system", or the stored text."""
    return actor_names([actor]).get(actor, actor)
