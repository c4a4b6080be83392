"""The queue's admin roles beyond the two the fence knows by themselves (the operator, a
superuser; a tenant's staff, by their membership): the read-only viewer.

A *viewer* is an active staff user, not a superuser, in the group named by
``WORKQUEUE["VIEWER_GROUP"]`` (``viewer_group()``; empty: no viewers): they read
every page of the queue's admin across every tenant, as the operator does (on the system
login), and change nothing: the admin offers them no action, no button and no form, and the
tenancy middleware refuses any request of theirs that is not a read (``refusal``), whatever was
posted. Membership of the group is the role: the group holds no Django permission (the queue's
admin asks the fence, not Django's per-model permissions). ``ensure_viewer_group`` makes the
group after every ``migrate`` (idempotent).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from wqcore.conf import wq_settings

# The requests that only read (every other method of a viewer is refused).
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# The admin's views a viewer may post to: signing out, and choosing (or leaving) a support
# view, which changes only their own session.
VIEWER_POSTS = frozenset({"logout", "workqueue_tenancy_support"})
# Where the answer is kept on the user for the rest of the request (one query per request).
_CACHED = "_workqueue_read_only"


def viewer_group() -> str:
    """The name of the viewers' group (empty: the site has none)."""
    return wq_settings.VIEWER_GROUP


def is_read_only(user: Any) -> bool:
    """Whether ``user`` is a viewer: active staff, not a superuser, in the viewers' group."""
    if user is None or not getattr(user, "is_authenticated", False) or not viewer_group():
        return False
    if not (user.is_active and user.is_staff) or user.is_superuser:
        return False
    cached: bool | None = getattr(user, _CACHED, None)
    if cached is None:
        cached = user.groups.filter(name=viewer_group()).exists()
        setattr(user, _CACHED, cached)
    return cached


def refusal(request: HttpRequest) -> str | None:
    """Why an admin request is refused to a viewer (None: it is not): anything but a read, on
    any view but signing out and the support view's choice."""
    if request.method in SAFE_METHODS or not is_read_only(getattr(request, "user", None)):
        return None
    match = getattr(request, "resolver_match", None)
    if match is not None and match.url_name in VIEWER_POSTS:
        return None
    return (
        f"{request.method} refused: the group {viewer_group()!r} may read the queue's admin "
        "but change nothing; ask the site's operator"
    )


def ensure_viewer_group(using: str = "default", apps: Any = None, **kwargs: Any) -> None:
    """Make the viewers' group if it is not there (a ``post_migrate`` receiver: every migrate,
    on the alias it migrated). ``apps``: the migrated state, as Django's own receivers read it
    (nothing is made where Django's groups are not migrated yet)."""
    from django.apps import apps as global_apps
    from django.db import router

    try:
        group = (apps or global_apps).get_model("auth", "Group")
    except LookupError:  # django.contrib.auth is not installed, or not migrated here
        return
    if not viewer_group() or not router.allow_migrate_model(using, group):
        return
    group.objects.using(using).get_or_create(name=viewer_group())
