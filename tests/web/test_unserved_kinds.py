"""A kind with due work that no live worker serves, though its lane is served for other kinds:
exported as ``workqueue_kind_unserved`` and warned of by ``manage.py check``."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.db import connections
from prometheus_client import generate_latest

from tenancy.current import using_context
from tests import tasks
from workers.gauges import GAUGES, registry
from workqueue import api

pytestmark = pytest.mark.usefixtures("committed")


def _worker(worker_id: str, kinds: str, lane: str = "default", state: str = "running") -> None:
    with connections["system"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO workqueue_workers_worker"
            " (id, kind, lane, host, pid, started_at, last_beat_at, state)"
            " VALUES (%s, %s, %s, 'h1', 42, now(), now(), %s)",
            [worker_id, kinds, lane, state],
        )


def _scrape() -> dict[tuple[str, str], str]:
    GAUGES.forget()
    page = generate_latest(registry()).decode()
    found = re.findall(r'workqueue_kind_unserved\{kind="([^"]+)",lane="([^"]+)"\} (\S+)', page)
    return {(lane, kind): value for kind, lane, value in found}


def _check() -> str:
    out = io.StringIO()
    call_command("check", stdout=out, stderr=out)
    return out.getvalue()


def test_a_kind_no_live_worker_serves_is_flagged_though_its_lane_is_served(ctx) -> None:
    api.enqueue(ctx, "NOOP", {})
    with using_context(ctx):
        tasks.add.enqueue(1, 2)
    _worker("w-noop", "NOOP")
    _worker("w-gone", "DJANGO_TASK", state="offline")
    values = _scrape()
    assert values[("default", "DJANGO_TASK")] == "1.0"
    assert values[("default", "NOOP")] == "0.0"
    # A registered kind with nothing due is listed, not flagged.
    assert values[("default", "NOTIFY_SHIPMENT")] == "0.0"
    assert "no running worker serves the kind 'DJANGO_TASK'" in _check()
    # A worker serving it starts: neither says it any more.
    _worker("w-all", "DJANGO_TASK,NOOP,NOTIFY_SHIPMENT")
    assert _scrape()[("default", "DJANGO_TASK")] == "0.0"
    assert "no running worker serves the kind 'DJANGO_TASK'" not in _check()


def test_check_says_nothing_of_kinds_while_no_worker_runs() -> None:
    _worker("w-gone", "NOOP", state="offline")
    assert "workqueue_workers.W002" not in _check()
