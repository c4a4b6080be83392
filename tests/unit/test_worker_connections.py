"""What a worker opens: its own connections derived from the store's pool settings (defaults
in wqcore/conf.py), checked against WORKER_DB_POOL_SIZE, and said by ``runworker --help``."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.helpers import queue_settings
from workers.config import Connections, WorkerSettings
from workers.management.commands.runworker import Command


def test_the_defaults_are_fourteen_connections_of_its_own() -> None:
    own = WorkerSettings(kinds=("NOOP",)).connections
    assert (own.store_tenant, own.store_system, own.store_claim) == (2, 2, 2)
    assert own.own() == 14
    assert own.describe() == (
        "14 (tenant pool 2, system pool 2, claim pool 2, LISTEN 1, woken claim 1, heartbeat 1, "
        "relay and sweep 3, lease keeper 1, liveness lock 1)"
    )


def test_no_liveness_lock_no_connection_for_it() -> None:
    with queue_settings(WORKER_LIVENESS_LOCK=False):
        assert WorkerSettings(kinds=("NOOP",)).connections.own() == 13
    with queue_settings(POOLER="transaction"):
        assert not WorkerSettings(kinds=("NOOP",)).holds_liveness_lock


def test_the_pools_come_from_the_settings_and_the_budget_follows() -> None:
    with queue_settings(WORKER_CLAIM_POOL_SIZE=4, WORKER_TENANT_POOL_SIZE=3):
        settings = WorkerSettings.from_settings(("NOTIFY_SHIPMENT",))  # a sync handler
    assert settings.connections == Connections(3, 2, 4)
    assert settings.connections.own() == 17
    # One thread, and one connection, per slot of what the pool leaves.
    assert settings.capacity == settings.threads == 20 - 17


def test_pools_beyond_the_budget_are_refused_naming_the_settings() -> None:
    with queue_settings(WORKER_SYSTEM_POOL_SIZE=30), pytest.raises(ImproperlyConfigured) as raised:
        WorkerSettings.from_settings(("NOOP",))
    message = str(raised.value)
    assert "need WORKER_DB_POOL_SIZE 42 or more (it is 20)" in message
    assert "WORKER_SYSTEM_POOL_SIZE" in message and "\n" not in message


@pytest.mark.parametrize("size", [0, 101])
def test_a_pool_size_out_of_bounds_is_one_line(size: int) -> None:
    with queue_settings(WORKER_CLAIM_POOL_SIZE=size), pytest.raises(ImproperlyConfigured) as raised:
        WorkerSettings.from_settings(("NOOP",))
    assert "WORKQUEUE['WORKER_CLAIM_POOL_SIZE']" in str(raised.value)


def test_runworker_help_names_no_example_apps_kind_and_says_what_it_opens() -> None:
    text = Command().create_parser("manage.py", "runworker").format_help()
    for demo_kind in ("NOOP", "NOTIFY_SHIPMENT"):
        assert demo_kind not in text
    assert "WORKER_METRICS_HOST = '127.0.0.1'" in text
    assert "database connections: 14 (tenant pool 2," in text
