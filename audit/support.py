"""The support view's trail (``tenancy.support``): each thing told to ``support_seen`` (a page
viewed, an action taken, the view begun or ended) is an entry in the viewed tenant's trail,
its actor the staff member, in the request's own transaction."""

from __future__ import annotations

from typing import Any

from audit.services import append
from tenancy.contexts import OpContext


def record(
    ctx: OpContext, action: str, subject: tuple[str, object], data: dict[str, Any], **kwargs: Any
) -> None:
    """Append what a support view did (a ``support_seen`` receiver)."""
    append(ctx, action, subject, data)
