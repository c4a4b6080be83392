"""Running committed work in the process that enqueued it, while developing
(``WORKQUEUE["RUN_ON_COMMIT"]``, ``workers.eager``): after the commit, through a worker's claim
and settle; never for rolled-back work; refused unless DEBUG."""

from __future__ import annotations

import subprocess

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.test import override_settings

from tests.runtime.support import EVENTS, PYTHON, ROOT, subprocess_env
from workers import eager
from workqueue import api
from workqueue.models import Attempt, Status, WorkItem
from wqcore.conf import tenant_alias


def _started() -> set[str]:
    return {item_id for item_id, event, _ in EVENTS if event == "start"}


@pytest.mark.usefixtures("run_on_commit")
def test_committed_work_has_run_when_the_commit_returns(ctx) -> None:  # type: ignore[no-untyped-def]
    with transaction.atomic(using=tenant_alias()):
        item, _ = api.enqueue(ctx, "TEST_SCRIPTED_SYNC", {"action": "ok"})
        assert str(item.id) not in _started()  # nothing runs before the commit
    stored = WorkItem.objects.using("admin").get(pk=item.id)
    # Claimed and settled under a token, as a worker does.
    assert (stored.status, stored.attempts) == (Status.DONE, 1)
    [attempt] = Attempt.objects.using("admin").filter(item_id=item.id)
    assert attempt.outcome == "done" and attempt.worker == stored.claimed_by


@pytest.mark.usefixtures("run_on_commit")
def test_rolled_back_work_never_runs(ctx) -> None:  # type: ignore[no-untyped-def]
    kept, _ = api.enqueue(ctx, "TEST_SCRIPTED_SYNC", {"action": "ok"})  # autocommit: at once
    with pytest.raises(RuntimeError), transaction.atomic(using=tenant_alias()):
        gone, _ = api.enqueue(ctx, "TEST_SCRIPTED_SYNC", {"action": "ok"})
        raise RuntimeError("the view failed")
    assert str(gone.id) not in _started() and str(kept.id) in _started()
    assert not WorkItem.objects.using("admin").filter(pk=gone.id).exists()


@pytest.mark.usefixtures("run_on_commit")
def test_a_failing_handler_leaves_its_item_as_a_worker_would(ctx, caplog) -> None:  # type: ignore[no-untyped-def]
    item, _ = api.enqueue(ctx, "TEST_SCRIPTED_SYNC", {"action": "retry"})  # the caller goes on
    stored = WorkItem.objects.using("admin").get(pk=item.id)
    assert (stored.status, stored.attempts) == (Status.PENDING, 1)  # its retry, later
    assert "run_on_commit_failed" in caplog.text and "try again" in caplog.text


def test_it_is_refused_unless_debug(settings) -> None:  # type: ignore[no-untyped-def]
    settings.DEBUG = False
    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "RUN_ON_COMMIT": True}):
        with pytest.raises(ImproperlyConfigured, match=r"RUN_ON_COMMIT.*DEBUG is off"):
            eager.start()


@pytest.mark.usefixtures("committed")
def test_a_process_with_debug_off_refuses_to_start() -> None:
    done = subprocess.run(
        [PYTHON, "manage.py", "check"],
        cwd=ROOT,
        env=subprocess_env(
            RUN_ON_COMMIT="true", DEBUG="false", SECRET_KEY="a-test-key-" + "x" * 40
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "WORKQUEUE['RUN_ON_COMMIT']" in done.stderr and "DEBUG is off" in done.stderr
