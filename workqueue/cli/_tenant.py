"""The ``--tenant`` the subcommands that act on one tenant's items take: the tenant as
``workqueue.api.tenant(...)`` names one (an org's slug or id; the site's own tenant's key),
refused with one line before anything is read or changed when the site has no such tenant."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import CommandError, CommandParser

from tenancy.naming import org_id_named

METAVAR = "ORG_OR_SLUG"


def add_tenant_argument(parser: CommandParser, what: str) -> None:
    """``--tenant``: ``what`` says what it narrows (e.g. "only this tenant's items")."""
    parser.add_argument(
        "--tenant",
        metavar=METAVAR,
        help=f"{what}: an org's slug or id (a site's own tenancy: the tenant's key)",
    )


def tenant_of(options: dict[str, Any], argument: str = "--tenant") -> uuid.UUID | None:
    """The queue's id of the ``--tenant`` given (None: none given), or a ``CommandError``
    naming ``argument`` and saying what to pass."""
    text = options.get("tenant")
    if not text:
        return None
    try:
        return org_id_named(str(text))
    except ValueError as exc:
        raise CommandError(str(exc).replace("tenant:", f"{argument}:", 1)) from None
