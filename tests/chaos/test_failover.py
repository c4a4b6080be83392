"""A primary failover during a drain: the primary's postmaster is SIGKILLed while items are
mid-handler, its streaming standby is promoted, and the workers go on on the new primary
without a restart.

The topology is the test's own (``tests/replication.py``): two clusters on free local ports, a
primary made once and migrated (``create_logins``, ``migrate``, ``grant_logins``) and copied for
each scenario, and a standby taken from it with ``pg_basebackup -R``. Three real ``runworker``
processes and the producer (a thread of this process enqueuing through Django's connections,
as a web process does) reach them through libpq multi-host URLs with
``target_session_attrs=read-write``, read by the settings as an operator writes them
(``DATABASE_URL``, ``SYSTEM_DATABASE_URL``): nothing else tells them where the primary is. The
scenario is in ``tests/chaos/failover.py``.

- Synchronous replication (``synchronous_standby_names = '*'``, ``synchronous_commit = on``):
  nothing acknowledged is lost. Every enqueue the producer saw acknowledged ends done with its
  effect applied once, no attempt number is handed out twice, and each worker says what
  happened in two lines (``database_unreachable``, then ``database_back`` naming the new
  server), without a traceback.
- Asynchronous replication, the standby's WAL stream held back for ``LAG_S`` before the crash
  (a standby that lags): what the primary acknowledged in that window is gone. The test counts
  what was lost (enqueues, claims, completions), what ran twice (effects committed twice, runs
  of one item live at once) and what the fences refused, and asserts what must hold even so:
  every item the new primary knows ends done, with its effect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import replication, summary
from tests.chaos.failover import LEASE_S, Findings, Outcome, fail_over, findings
from tests.replication import DATABASE

pytestmark = pytest.mark.slow

LAG_S = 1.0
# Each scenario's part of the summary line.
PARTS: dict[str, str] = {}


def _state(key: str, part: str) -> None:
    PARTS[key] = part
    ordered = [PARTS[k] for k in ("synchronous", "asynchronous") if k in PARTS]
    summary.state("failover", "failover: " + "; ".join(ordered))


@pytest.fixture
def make_pair(
    template: replication.Server, aim: Callable[[Callable[[str], str]], None]
) -> Iterator[Callable[..., replication.Pair]]:
    """Makes a pair and points this process's three aliases at it through multi-host URLs."""
    made: list[replication.Pair] = []

    def make(*, synchronous: bool) -> replication.Pair:
        pair = replication.pair(template, synchronous=synchronous)
        made.append(pair)
        aim(lambda user: pair.url(user, DATABASE))
        return pair

    try:
        yield make
    finally:
        for pair in made:
            pair.stop()


def _resume(found: Findings, outcome: Outcome) -> str:
    resume = f"{max(found.resume_s):.1f} s" if found.resume_s else "never"
    rerun = f"{found.rerun_after_s:.1f} s" if found.rerun_after_s is not None else "never"
    return (
        f"workers resumed {resume} after the promotion (the last of {len(outcome.workers)};"
        f" promoted {outcome.promoted_at - outcome.killed_at:.1f} s after the crash), the"
        f" {outcome.claimed_at_kill} items mid-handler at the crash ran again within {rerun}"
        f" (lease {LEASE_S:g} s)"
    )


def _check_workers(found: Findings, outcome: Outcome) -> None:
    """Each worker lived through it and said so in two lines, naming the new server."""
    logs = "\n\n".join(w.output()[-4000:] for w in outcome.workers)
    assert outcome.exit_codes == [0] * len(outcome.workers), logs
    assert found.tracebacks == 0, logs
    # How often a worker says so depends on the machine's load (a busy one may see the outage
    # twice); what must hold: each saw it, and each outage it saw ended with it back.
    assert all(n >= 1 for n in found.lines["database_unreachable"]), logs
    for worker in outcome.workers:  # and its last outage ended, however many it saw
        said = [line for line in worker.output().splitlines() if " database_" in line]
        outages = [line for line in said if " database_unreachable " in line]
        assert outages and " database_back " in said[-1], said
    for worker in outcome.workers:
        said = [line for line in worker.output().splitlines() if " database_back " in line]
        assert any(" was=" in line for line in said), said  # another server than before
    assert len(found.resume_s) == len(outcome.workers), "a worker completed nothing after it"


def test_a_failover_with_synchronous_replication_loses_and_doubles_nothing(
    make_pair: Callable[..., replication.Pair], tmp_path: Path
) -> None:
    outcome = fail_over(make_pair(synchronous=True), tmp_path, lag_s=0.0)
    found = findings(outcome)
    _state(
        "synchronous",
        f"synchronous: {found.items} items, lost {found.not_done + found.enqueues_lost},"
        f" claims forgotten {found.claims_forgotten}, effects doubled {found.doubled},"
        f" run again after their effect {found.ran_again_after_effect} (fenced mid-handler),"
        f" run twice at once {found.overlapping}; {_resume(found, outcome)}",
    )
    _check_workers(found, outcome)
    assert outcome.claimed_at_kill > 0, "no item was mid-handler at the crash"
    assert (found.not_done, found.without_effect, found.enqueues_lost) == (0, 0, 0), found
    assert (found.claims_forgotten, found.doubled) == (0, 0), found


def test_a_failover_with_asynchronous_replication_loses_only_what_the_standby_lacked(
    make_pair: Callable[..., replication.Pair], tmp_path: Path
) -> None:
    outcome = fail_over(make_pair(synchronous=False), tmp_path, lag_s=LAG_S)
    found = findings(outcome)
    _state(
        "asynchronous",
        f"asynchronous (standby {LAG_S:g} s behind): {found.items} items, acknowledged"
        f" enqueues lost {found.enqueues_lost}, claims forgotten {found.claims_forgotten},"
        f" run again after their effect {found.ran_again_after_effect}, effects doubled"
        f" {found.doubled}, run twice at once {found.overlapping}, refused stale writes"
        f" {found.refused_cas + found.refused_settles} (record CAS {found.refused_cas}, queue"
        f" fence {found.refused_settles}), lost for good {found.not_done + found.without_effect};"
        f" {_resume(found, outcome)}",
    )
    _check_workers(found, outcome)
    assert outcome.claimed_at_kill > 0, "no item was mid-handler at the crash"
    # Whatever the new primary knows ends done, with its effect: nothing is lost for good.
    assert (found.not_done, found.without_effect) == (0, 0), found
