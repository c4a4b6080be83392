"""Actors by name: an actor is stored as text (the site's user's primary key, or the system
actor); people read the user's name (``get_username()``), whatever the user model."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from wqcore.actor import SYSTEM_ACTOR

# The most actors one page names (each page names a few; this bounds one read).
NAMES_MAX = 500


def actor_names(actors: Iterable[str]) -> dict[str, str]:
    """Each actor's name for a page: the user's ``get_username()`` (read in one query, on the
    database the site's routers give the user model), "system" for the system actor, and the
    stored text itself for an actor that is no user (gone, or not a key of this model)."""
    wanted = {str(a) for a in actors if a}
    names = {a: a for a in wanted}
    if SYSTEM_ACTOR in wanted:
        names[SYSTEM_ACTOR] = "system"
    User = get_user_model()
    keys = {}
    for actor in list(wanted - {SYSTEM_ACTOR})[:NAMES_MAX]:
        try:
            keys[User._meta.pk.to_python(actor)] = actor
        except (ValidationError, ValueError, TypeError):
            continue
    if keys:
        for user in User._default_manager.filter(pk__in=list(keys)):
            names[keys[user.pk]] = user.get_username() or str(user)
    return names
