"""What the queue's admin templates ask of the roles (``tenancy.roles``)."""

from __future__ import annotations

from typing import Any

from django import template

from tenancy.roles import is_read_only

register = template.Library()


@register.filter
def read_only(user: Any) -> bool:
    """Whether ``user`` is a viewer, who reads the queue's admin and acts on nothing."""
    return is_read_only(user)
