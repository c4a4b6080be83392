"""Test set-up on real PostgreSQL, with the product's three logins.

The owner login (alias ``admin``) creates and migrates the test database; the everyday and
system logins are pointed at it, so every test meets row-level security exactly as the product
does. Tests that need commits (other connections, SKIP LOCKED, NOTIFY, other logins) take the
``committed`` fixture, which empties the tables afterwards as the owner.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable, Iterator

import pytest
from django.db import OperationalError, connections

from tenancy.contexts import AppType, OpContext, RequestContext, Role, new_request_context
from tenancy.models import Org
from tests.factories import MembershipFactory, OrgFactory

# Tables set up by migrate that the tests never write; emptying them would break later tests.
_KEEP = {"django_migrations", "django_content_type", "auth_permission"}


@pytest.fixture(scope="session")
def django_db_setup(django_test_environment: None, django_db_blocker) -> Iterator[None]:
    from django.core.management import call_command
    from django.test.utils import setup_databases, teardown_databases

    with django_db_blocker.unblock():
        call_command("create_logins", verbosity=0, stdout=io.StringIO())
        old = setup_databases(
            verbosity=0, interactive=False, aliases=["admin"], serialized_aliases=[]
        )
        for alias in ("default", "system"):
            connections[alias].close()
            connections[alias].creation.set_as_test_mirror(connections["admin"].settings_dict)
    yield
    from asgiref.sync import sync_to_async

    from workers.sweep.sweeper import close_lock

    with django_db_blocker.unblock():
        close_lock()  # the sweeps the tests ran on this thread kept their lock's connection
        # Django's sync thread (sync_to_async from a test's event loop) keeps its connections.
        asyncio.run(sync_to_async(connections.close_all)())
        connections.close_all()
        # Threads and subprocesses of the runtime tests may still hold a session; end them so
        # the test database can be dropped.
        with connections["admin"].cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        connections.close_all()
        teardown_databases(old, verbosity=0)


def empty_tables() -> None:
    """Empty every table the tests write, as the owner (the other logins may not TRUNCATE)."""
    admin = connections["admin"]
    tables = [
        t for t in admin.introspection.django_table_names(only_existing=True) if t not in _KEEP
    ]
    statement = "TRUNCATE " + ", ".join(admin.ops.quote_name(t) for t in tables) + " CASCADE"
    for attempt in range(3):
        try:
            with admin.cursor() as cursor:
                cursor.execute(statement)
            return
        except OperationalError as exc:
            # TRUNCATE locks every table at once; a session a test left behind (a thread or a
            # subprocess still finishing) may lock them in another order: PostgreSQL breaks the
            # deadlock by failing one side, and the other gets through. Try again.
            if "deadlock" not in str(exc) or attempt == 2:
                raise


@pytest.fixture(autouse=True)
def _fresh_gauges() -> None:
    """Every test reads the queue's gauges afresh: a reading cached by an earlier test (for
    ``GAUGES_CACHE_S``) would show that test's rows, so a test would pass or fail by the order
    it runs in."""
    from workers.gauges import GAUGES

    GAUGES.forget()


@pytest.fixture
def committed(django_db_setup: None, django_db_blocker) -> Iterator[None]:
    """Database access with real commits, every table emptied afterwards."""
    with django_db_blocker.unblock():
        try:
            yield
        finally:
            for alias in ("default", "system"):
                if connections[alias].in_atomic_block:
                    connections[alias].rollback()
            empty_tables()


@pytest.fixture
def worker_rctx() -> RequestContext:
    return new_request_context(AppType.WORKER)


@pytest.fixture
def make_ctx() -> Callable[..., OpContext]:
    """A member's context in a new (or the given) org."""

    def make(org: Org | None = None) -> OpContext:
        member = MembershipFactory(org=org or OrgFactory(), role=Role.MEMBER)
        rctx = new_request_context(AppType.WEB, traceparent=None)
        return OpContext(
            org_id=member.org_id, user_id=str(member.user_id), role=member.role, rctx=rctx
        )

    return make


@pytest.fixture
def ctx(committed: None, make_ctx: Callable[..., OpContext]) -> OpContext:
    return make_ctx()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    """The proof suites' summary lines (tests/summary.py), one per suite that ran."""
    from tests import summary

    found = summary.lines()
    if found:
        terminalreporter.section("proof suites")
        for line in found:
            terminalreporter.write_line(line)


@pytest.fixture
def run_on_commit(settings) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """``WORKQUEUE["RUN_ON_COMMIT"]`` on (with DEBUG) in this process, for the test."""
    from django.test import override_settings

    from workers import eager

    settings.DEBUG = True
    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "RUN_ON_COMMIT": True}):
        eager.start()
        try:
            yield
        finally:
            eager.off()
