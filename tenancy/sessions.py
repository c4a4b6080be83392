"""Expired sessions: purged by the sweep in bounded batches, by the database's clock."""

from __future__ import annotations

import logging

from django.db.models.functions import Now

from wqcore.conf import system_alias
from wqcore.logs import log_event

logger = logging.getLogger(__name__)


def purge_expired_sessions(batch: int = 1000, max_batches: int = 100) -> int:
    """Delete sessions whose expiry passed, at most ``batch`` per statement and ``max_batches``
    per call; returns how many. Unlike ``clearsessions`` (one unbounded DELETE), a purge here
    never holds locks on a large table for long.

    Takes no tenant: sessions belong to sign-in, before any tenant is known; system login.
    """
    from django.contrib.sessions.models import Session

    sessions = Session.objects.using(system_alias())
    total = 0
    for _ in range(max_batches):
        keys = list(
            sessions.filter(expire_date__lt=Now()).values_list("session_key", flat=True)[:batch]
        )
        if keys:
            total += sessions.filter(session_key__in=keys, expire_date__lt=Now()).delete()[0]
        if len(keys) < batch:
            break  # a short batch: nothing more has expired
    if total:
        log_event(logger, logging.INFO, "sessions_purged", count=total)
    return total
