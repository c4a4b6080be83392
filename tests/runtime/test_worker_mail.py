"""A real ``runworker`` in a site with Django's default logging (the ``django`` logger mails
``ADMINS`` each ERROR when DEBUG is off): a failed attempt that will be retried mails no one;
a dead letter reaches the admins once at most (Django's own ``django.tasks`` line of a task
that failed for good); and the worker leaves ``DEBUG`` as the site set it."""

from __future__ import annotations

import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest
from django.tasks import TaskResultStatus

from tenancy.contexts import OpContext
from tenancy.current import using_context
from tests import tasks
from tests.runtime.support import PYTHON, ROOT, subprocess_env

pytestmark = [pytest.mark.usefixtures("committed"), pytest.mark.slow]


def _mails(folder: Path) -> list[str]:
    """The subject of every message the worker sent (the file backend: a file per
    connection, messages separated by a line of dashes)."""
    return [
        line.removeprefix("Subject: ")
        for path in sorted(folder.iterdir())
        for line in path.read_text().splitlines()
        if line.startswith("Subject: ")
    ]


@pytest.mark.parametrize("debug", [False, True])
def test_a_retry_mails_no_one_and_a_dead_letter_once_at_most(
    ctx: OpContext, tmp_path: Path, debug: bool
) -> None:
    with using_context(ctx):
        retried = tasks.flaky.enqueue(fail_times=1)
        dead = tasks.always_fails.enqueue("declined")
        debug_seen = tasks.debug_setting.enqueue()
        results = [retried, dead, debug_seen]
    proc = subprocess.Popen(
        [PYTHON, "manage.py", "runworker", "DJANGO_TASK", "--metrics-port", "-1"],
        cwd=ROOT,
        env=subprocess_env(
            DJANGO_SETTINGS_MODULE="tests.runtime.mail_settings",
            TEST_MAIL_DIR=str(tmp_path),
            DEBUG=str(debug).lower(),
            SECRET_KEY=secrets.token_urlsafe(50),
            WORKER_POLL_INTERVAL_MS="50",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with using_context(ctx):
                for result in results:
                    result.refresh()
            if all(result.is_finished for result in results):
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    assert (retried.status, retried.attempts) == (TaskResultStatus.SUCCESSFUL, 2), output
    assert (dead.status, dead.attempts) == (TaskResultStatus.FAILED, 2), output
    assert debug_seen.return_value is debug
    mails = _mails(tmp_path)
    if debug:
        assert mails == []
    else:
        # Django's own line for the task that failed for good; nothing for either retry.
        [subject] = mails
        assert subject.startswith(f"[Django] ERROR: Task id={dead.id}"), mails
