"""The queue's one settings object (``WORKQUEUE``, defaults in ``wqcore/conf.py``): a site writes
only what it changes; a wrong name or value is one line naming it; the commands print what is
in effect."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from tests.helpers import queue_settings
from tests.runtime.support import ROOT
from wqcore import conf
from wqcore.conf import load, owner_alias, system_alias, tenant_alias, wq_settings


def test_every_default_is_in_one_place_and_says_what_it_is_for() -> None:
    defaults = load({})
    assert defaults.TENANCY == "single" and defaults.LANES == ["default"]
    assert defaults.WORKER_LEASE_S == 30.0 and defaults.SWEEP_PURGE_SESSIONS is False
    for name in conf.NAMES:
        assert conf.describe(name), f"{name} says nothing of what it is for"


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (
            {"LEASE_S": 3},
            r"WORKQUEUE\['LEASE_S'\]: no such setting \(did you mean 'WORKER_LEASE_S'\?\)",
        ),
        (
            {"WORKER_LEASE_S": "soon"},
            r"WORKQUEUE\['WORKER_LEASE_S'\]: Input should be a valid number",
        ),
        ({"WORKER_CAPACITY": 0}, r"WORKQUEUE\['WORKER_CAPACITY'\]: Input should be greater than"),
        ({"POOLER": "session"}, r"WORKQUEUE\['POOLER'\]: Input should be 'none' or 'transaction'"),
        ({"LANES": "default"}, r"WORKQUEUE\['LANES'\]: Input should be a valid list"),
        (
            # A rule between two settings: the worker must fence itself well inside the grace.
            {"SWEEP_RESCUE_GRACE_S": 1.0, "WORKER_LIVENESS_CHECK_S": 0.6},
            r"^WORKQUEUE: SWEEP_RESCUE_GRACE_S \(1.0\) must be at least twice WORKER_LIVENESS",
        ),
    ],
)
def test_a_wrong_setting_is_one_line_naming_it(given: dict[str, object], says: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=says) as raised:
        load(given)
    assert "\n" not in str(raised.value)


def test_the_settings_follow_override_settings() -> None:
    before = wq_settings.WORKER_LEASE_S
    with queue_settings(WORKER_LEASE_S=7):
        assert wq_settings.WORKER_LEASE_S == 7.0
    assert wq_settings.WORKER_LEASE_S == before


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_the_aliases_follow_the_site_and_default_to_its_one_login(settings) -> None:  # type: ignore[no-untyped-def]
    # The reference site names its three logins.
    assert (tenant_alias(), system_alias(), owner_alias()) == ("default", "system", "admin")
    # A site of one login: every alias is its default one.
    with override_settings(WORKQUEUE={}):
        only = {"default": settings.DATABASES["default"]}
        with override_settings(DATABASES=only):
            assert (tenant_alias(), system_alias(), owner_alias()) == ("default",) * 3


def test_the_commands_print_the_settings_in_effect() -> None:
    for command, shown in (("runworker", "WORKER_LEASE_S = 12.5"), ("sweep", "SWEEP_BATCH = 1000")):
        done = subprocess.run(
            [sys.executable, "manage.py", command, "--help"],
            cwd=ROOT,
            env={**os.environ, "WORKER_LEASE_S": "12.5", "LOG_FORMAT": "json"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "settings (WORKQUEUE[...]):" in done.stdout
        assert shown in done.stdout, done.stdout[-2000:]
        assert "LOG_FORMAT = 'json'" in done.stdout, done.stdout[-2000:]


def test_the_worker_and_the_sweep_read_the_settings_and_check_a_given_value_by_them() -> None:
    from workers.config import WorkerSettings
    from workers.sweep.config import SweepSettings

    with queue_settings(WORKER_CLAIM_BATCH=7, SWEEP_BATCH=9):
        assert WorkerSettings(kinds=("NOOP",)).claim_batch == 7
        assert SweepSettings().batch == 9
    # A command-line option is checked by its setting's definition, and named as given.
    with pytest.raises(ImproperlyConfigured) as raised:
        WorkerSettings.from_settings(("NOOP",), capacity=0)
    assert str(raised.value) == (
        "--capacity/WORKER_CAPACITY: Input should be greater than or equal to 1 (got 0)"
    )
    with pytest.raises(ImproperlyConfigured, match=r"WORKQUEUE\['SWEEP_MAX_BATCHES'\]: Input"):
        SweepSettings(max_batches=0)
    # What one setting's definition cannot say: the renewal within a third of the lease.
    with pytest.raises(ImproperlyConfigured, match="at most a third of WORKER_LEASE_S"):
        WorkerSettings(kinds=("NOOP",), lease_s=3.0, renew_timeout_s=2.0).validate()
