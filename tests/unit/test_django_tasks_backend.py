"""The django.tasks backend without a database: options, @retries, checks, JSON values.

No test here may touch the database (pytest-django refuses it), which is itself the point of
``test_making_the_backend_and_a_task_touches_no_database``.
"""

from __future__ import annotations

import datetime
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workers.django_tasks.backend import WorkQueueBackend
from workers.django_tasks.compat import InvalidTask, task
from workers.django_tasks.policy import DEFAULT_POLICY, parse_options, retries
from workers.django_tasks.values import json_arguments, json_value
from workqueue.api import RetryPolicy

ROOT = Path(__file__).resolve().parents[2]


def _backend(**params: Any) -> WorkQueueBackend:
    return WorkQueueBackend("probe", {"BACKEND": "x", **params})


def test_making_the_backend_and_a_task_touches_no_database() -> None:
    backend = _backend(QUEUES=["default", "emails"], OPTIONS={"MAX_ATTEMPTS": 3})
    assert backend.policy.max_attempts == 3 and backend.problems == []
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority
    from tests import tasks

    assert tasks.add.using(priority=5, queue_name="default").priority == 5


def test_the_options_default_to_the_kinds_policy() -> None:
    policy, problems = parse_options({})
    assert problems == [] and policy == DEFAULT_POLICY
    assert policy.retry == RetryPolicy() and policy.max_attempts == 5


def test_options_read_from_the_environment_come_as_text() -> None:
    policy, problems = parse_options(
        {"MAX_ATTEMPTS": "9", "RETRY_BASE_S": "0.5", "RETRY_CAP_S": 60, "RETRY_JITTER": "0"}
    )
    assert problems == []
    assert policy.max_attempts == 9
    assert policy.retry == RetryPolicy(base_s=0.5, factor=2.0, cap_s=60.0, jitter=0.0)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"MAX_ATTEMPT": 3}, "unknown key 'MAX_ATTEMPT' (did you mean 'MAX_ATTEMPTS'?"),
        ({"RETRY_BASE": 3}, "did you mean 'RETRY_BASE_S'?"),
        ({"NOTHING_LIKE_IT": 1}, "unknown key 'NOTHING_LIKE_IT' (known: MAX_ATTEMPTS,"),
        ({"MAX_ATTEMPTS": "many"}, "OPTIONS['MAX_ATTEMPTS'] must be a whole number"),
        ({"MAX_ATTEMPTS": 2.5}, "must be a whole number (got 2.5; environment: TASKS_MAX"),
        ({"MAX_ATTEMPTS": True}, "must be a whole number"),
        ({"MAX_ATTEMPTS": 0}, "MAX_ATTEMPTS: must be an integer from 1 to 1000"),
        ({"MAX_ATTEMPTS": 5000}, "from 1 to 1000"),
        ({"RETRY_BASE_S": "nan"}, "OPTIONS['RETRY_BASE_S'] must be a number"),
        ({"RETRY_BASE_S": "inf"}, "must be a number"),
        ({"RETRY_BASE_S": -1}, "base_s > 0"),
        ({"RETRY_FACTOR": 0.5}, "factor >= 1"),
        ({"RETRY_JITTER": 1}, "jitter must be in [0, 1)"),
        ({"RETRY_CAP_S": None}, "OPTIONS['RETRY_CAP_S'] must be a number (got None"),
        ({"RETRY_CAP_S": 100_000}, "a retry delay may be at most 86400 s"),
        ({"RETRY_FACTOR": 1000}, "factor may be at most 100"),
        ([("MAX_ATTEMPTS", 3)], "OPTIONS must be a dict, not list"),
    ],
)
def test_a_bad_option_is_one_clear_problem_and_the_default_policy(
    options: Any, problem: str
) -> None:
    policy, problems = parse_options(options)
    assert len(problems) == 1 and problem in problems[0], problems
    assert policy == DEFAULT_POLICY


def test_the_system_check_reports_each_problem() -> None:
    backend = _backend(QUEUES=["default", "no spaces"], OPTIONS={"MAX_ATTEMPT": 3})
    messages = list(backend.check())
    assert [m.id for m in messages] == ["djtasks.E001", "djtasks.E001"]
    text = " | ".join(m.msg for m in messages)
    assert "TASKS['probe']: OPTIONS has an unknown key 'MAX_ATTEMPT'" in text
    assert "QUEUES: must be 1 to 50 letters, digits or _ . : -" in text
    assert list(_backend().check()) == []
    odd = WorkQueueBackend("my tasks", {"BACKEND": "x"})
    [message] = list(odd.check())
    assert "the TASKS alias must be 1 to 100 letters" in message.msg


def test_the_check_names_the_app_that_holds_the_results(settings) -> None:  # type: ignore[no-untyped-def]
    from django.apps import apps

    installed = [a for a in settings.INSTALLED_APPS if a != "workers.django_tasks"]
    apps.set_installed_apps(installed)
    try:
        [message] = list(_backend().check())
    finally:
        apps.unset_installed_apps()
    assert message.id == "djtasks.E002" and "'workers.django_tasks'" in message.hint


def _check_in_a_process(
    *, unimportable: tuple[str, ...] = (), **env: str
) -> subprocess.CompletedProcess[str]:
    """``manage.py check`` in a process of its own, where the modules named cannot import."""
    code = (
        "import sys\n"
        f"sys.modules.update(dict.fromkeys({unimportable!r}))\n"
        "from django.core.management import execute_from_command_line\n"
        "execute_from_command_line(['manage.py', 'check'])\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_backends_check_runs_with_djangos_on_every_django() -> None:
    # Django 6 registers the backends' checks with django.tasks; on 5.2 the compat module does.
    done = _check_in_a_process(TASKS_MAX_ATTEMPTS="0")
    assert done.returncode == 1, done.stderr
    assert "(djtasks.E001) TASKS['default']: OPTIONS: MAX_ATTEMPTS" in done.stderr


def test_without_a_task_api_the_app_names_the_package_to_install() -> None:
    done = _check_in_a_process(unimportable=("django.tasks", "django_tasks"))
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: workers.django_tasks ")
    assert "install the django-tasks package" in last and "[tasks]" in last


def test_retries_sets_a_tasks_own_policy_and_refuses_nonsense_at_import() -> None:
    def probe() -> None:
        pass

    assert retries(max_attempts=3)(probe) is probe
    for bad, message in (
        ({"max_attempts": 0}, "max_attempts: must be an integer from 1 to 1000"),
        ({"max_attempts": "3"}, "max_attempts: must be an integer"),
        ({"base_s": 0}, "base_s > 0"),
        ({"jitter": 1.5}, "jitter must be in [0, 1)"),
        ({"base_s": "1"}, "base_s must be a number, not str"),
        ({"cap_s": math.nan}, "cap_s > 0"),
    ):
        with pytest.raises(ValueError, match=r"^@retries: ") as caught:
            retries(**bad)
        assert message in str(caught.value)


def test_retries_goes_below_task() -> None:
    from tests import tasks

    with pytest.raises(TypeError, match="goes below @task"):
        retries(max_attempts=2)(tasks.add)


def test_a_hand_made_retries_attribute_is_refused() -> None:
    from tests.tasks import _impl

    _impl.workqueue_retries = {"max_attempts": 100}  # type: ignore[attr-defined]
    try:
        with pytest.raises(InvalidTask, match="set by @retries"):
            task(_impl)
    finally:
        del _impl.workqueue_retries  # type: ignore[attr-defined]


def test_json_values_follow_django_and_name_the_first_problem() -> None:
    assert json_value((1, (2, b"x")), "v") == [1, [2, "x"]]
    assert json_arguments((1,), {"k": {"a": None}}) == ([1], {"k": {"a": None}})
    with pytest.raises(TypeError, match=r"args\[1\]\[0\]: a datetime is not JSON"):
        json_arguments((1, [datetime.datetime.now()]), {})
    with pytest.raises(ValueError, match=r"kwargs\['x'\]\['y'\]: NaN"):
        json_arguments((), {"x": {"y": math.nan}})
    with pytest.raises(ValueError, match=r"args\[0\] key 'a\\x00': must not contain a NUL"):
        json_arguments(({"a\x00": 1},), {})
    with pytest.raises(ValueError, match=r"args\[0\]\['k'\]: must be valid Unicode"):
        json_arguments(({"k": "\ud800"},), {})


def test_the_worker_keeps_capacity_and_gives_the_threads_its_pool_leaves() -> None:
    from workers.config import WorkerSettings

    own = WorkerSettings(kinds=("DJANGO_TASK",)).connections.own()
    tasks_only = WorkerSettings(kinds=("DJANGO_TASK",), db_pool_size=20)
    assert (tasks_only.capacity, tasks_only.threads) == (100, 20 - own)
    tasks_only.validate()
    # beside a sync handler, one thread per slot as before
    mixed = WorkerSettings(kinds=("DJANGO_TASK", "NOTIFY_SHIPMENT"), db_pool_size=20)
    assert mixed.capacity == mixed.threads == 20 - own
    cramped = WorkerSettings(kinds=("DJANGO_TASK",), db_pool_size=own)
    with pytest.raises(Exception, match=f"need WORKER_DB_POOL_SIZE {own + 1} or more"):
        cramped.validate()


def test_a_time_limit_from_the_options_or_the_task() -> None:
    from workers.django_tasks.policy import TIME_LIMIT_ATTRIBUTE, task_policy, time_limit

    policy, problems = parse_options({"TIMEOUT_S": "30"})
    assert problems == [] and policy.timeout_s == 30.0
    assert parse_options({})[0].timeout_s is None  # the kind's limit
    _, problems = parse_options({"TIMEOUT_S": -1})
    assert problems and "OPTIONS['TIMEOUT_S'] must be 0 (no limit)" in problems[0]
    with pytest.raises(ValueError, match="@time_limit: seconds must be"):
        time_limit(-1)
    with pytest.raises(ValueError, match="@time_limit: seconds must be"):
        time_limit(True)  # type: ignore[arg-type]

    @time_limit(5)
    def f() -> None: ...

    assert getattr(f, TIME_LIMIT_ATTRIBUTE) == 5.0

    class FakeTask:
        func = f

    assert task_policy(FakeTask, policy).timeout_s == 5.0  # type: ignore[arg-type]
