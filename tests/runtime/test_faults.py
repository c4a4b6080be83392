"""The fault kit (``workers.testing.faults``) on real processes and PostgreSQL: each fault with
a handler that keeps the queue's guarantee (its assertion passes) and a broken one that the
kit catches (its assertion fails, saying why)."""

from __future__ import annotations

import pytest

from tenancy.contexts import OpContext
from tests.runtime.fault_kinds import MAIL, RECEIPT, RECEIPT_ASYNC
from workers import testing
from workers.testing import faults
from workers.testing.held import HeldWorker
from workqueue.models import Status


def mails() -> int:
    """The side effect: mails the receipts enqueued (whatever became of them)."""
    return len(testing.enqueued(MAIL, status="*"))


# -- a worker killed mid-handler ------------------------------------------------------------------


@pytest.mark.parametrize("kind", [RECEIPT, RECEIPT_ASYNC])
def test_a_killed_workers_item_runs_again_once_and_a_keyed_mail_is_sent_once(
    ctx: OpContext, kind: str
) -> None:
    fault = faults.kill_mid_handler(kind, {"order": 1}, ctx=ctx)
    faults.assert_ran_again_once(fault, side_effects=mails)
    assert [a.outcome for a in fault.attempts] == ["holder_gone", "done"]
    assert fault.item.attempts == 2 and fault.item.result == {"mail": "key_exists"}


def test_killed_before_its_first_line_the_handler_runs_once_to_its_end(ctx: OpContext) -> None:
    fault = faults.kill_mid_handler(RECEIPT, {"order": 1, "how": "unkeyed"}, at="started", ctx=ctx)
    faults.assert_ran_again_once(fault, side_effects=mails)  # nothing done before the kill


def test_the_kit_catches_a_handler_that_repeats_its_mail_after_a_kill(ctx: OpContext) -> None:
    fault = faults.kill_mid_handler(RECEIPT, {"order": 1, "how": "unkeyed"}, ctx=ctx)
    with pytest.raises(AssertionError, match=r"happened 2 time\(s\), not once: the item ran again"):
        faults.assert_ran_again_once(fault, side_effects=mails)


def test_the_kit_catches_a_handler_that_cannot_run_again_after_a_kill(ctx: OpContext) -> None:
    fault = faults.kill_mid_handler(RECEIPT, {"order": 1, "how": "strict"}, ctx=ctx)
    with pytest.raises(AssertionError, match=r"failed on the second run \(RuntimeError: the mail"):
        faults.assert_ran_again_once(fault)


# -- a lease expired, and the stale holder --------------------------------------------------------


def test_an_expired_lease_hands_the_item_back_and_the_frozen_holders_completion_is_refused(
    ctx: OpContext,
) -> None:
    fault = faults.expire_lease(RECEIPT, {"order": 1}, ctx=ctx)
    faults.assert_ran_again_once(fault, side_effects=mails)
    faults.assert_stale_write_refused(fault, side_effects=mails)
    assert [a.outcome for a in fault.attempts] == ["lease_expired", "done"]
    assert "stale_complete_refused" in fault.refused


def test_the_kit_catches_a_handler_that_repeats_its_mail_after_an_expired_lease(
    ctx: OpContext,
) -> None:
    fault = faults.expire_lease(RECEIPT, {"order": 1, "how": "unkeyed"}, ctx=ctx)
    with pytest.raises(AssertionError, match=r"happened 2 time\(s\)"):
        faults.assert_ran_again_once(fault, side_effects=mails)


@pytest.mark.parametrize("kind", [RECEIPT, RECEIPT_ASYNC])
def test_a_stale_holders_late_progress_and_completion_are_refused(
    ctx: OpContext, kind: str
) -> None:
    fault = faults.stale_holder(kind, {"order": 1}, ctx=ctx)
    faults.assert_stale_write_refused(fault, side_effects=mails)
    assert {"stale_progress_refused", "stale_complete_refused"} <= set(fault.refused)
    assert fault.item.status == Status.DONE and fault.item.attempts == 2


def test_the_kit_catches_a_stale_holder_that_repeats_the_newer_claims_mail(ctx: OpContext) -> None:
    fault = faults.stale_holder(RECEIPT, {"order": 1, "how": "unkeyed"}, ctx=ctx)
    with pytest.raises(AssertionError, match="the stale holder's handler ran after the newer"):
        faults.assert_stale_write_refused(fault, side_effects=mails)


# -- the connection cut mid-settle ----------------------------------------------------------------


def test_a_settle_cut_mid_statement_leaves_nothing_and_settles_once(ctx: OpContext) -> None:
    fault = faults.cut_mid_settle(RECEIPT, {"order": 1, "how": "unkeyed"}, ctx=ctx)
    faults.assert_settled_whole(fault, side_effects=mails)
    assert fault.cut >= 1 and [a.outcome for a in fault.attempts] == ["done"]


def test_a_settle_cut_and_its_worker_killed_runs_again_once(ctx: OpContext) -> None:
    fault = faults.cut_mid_settle(RECEIPT, {"order": 1}, kill=True, ctx=ctx)
    faults.assert_settled_whole(fault, side_effects=mails)
    assert [a.outcome for a in fault.attempts] == ["holder_gone", "done"]


def test_the_kit_catches_a_handler_that_repeats_its_mail_after_a_cut_settle(
    ctx: OpContext,
) -> None:
    fault = faults.cut_mid_settle(RECEIPT, {"order": 1, "how": "unkeyed"}, kill=True, ctx=ctx)
    with pytest.raises(AssertionError, match="the settle was cut, and the handler's work was done"):
        faults.assert_settled_whole(fault, side_effects=mails)


# -- a raise after the side effect ----------------------------------------------------------------


@pytest.mark.parametrize("kind", [RECEIPT, RECEIPT_ASYNC])
def test_a_raise_after_a_keyed_mail_is_retried_and_the_retry_sends_nothing(
    ctx: OpContext, kind: str
) -> None:
    fault = faults.raise_after_side_effect(kind, {"order": 1}, ctx=ctx)
    faults.assert_attempt_counted(fault)
    faults.assert_side_effect_not_retried(fault, side_effects=mails)
    assert [a.outcome for a in fault.attempts] == ["retried", "done"]
    assert "InjectedFault" in fault.attempts[0].error


def test_a_raise_after_a_marked_side_effect_is_a_dead_letter_not_a_retry(ctx: OpContext) -> None:
    fault = faults.raise_after_side_effect(RECEIPT, {"order": 1, "how": "marked"}, ctx=ctx)
    faults.assert_side_effect_not_retried(fault, side_effects=mails)
    assert fault.item.status == Status.FAILED and fault.rerun is None


def test_the_kit_catches_a_retry_that_fails_on_the_side_effect_it_finds(ctx: OpContext) -> None:
    fault = faults.raise_after_side_effect(RECEIPT, {"order": 1, "how": "strict"}, ctx=ctx)
    with pytest.raises(AssertionError, match=r"the retry did not complete \(RuntimeError: the"):
        faults.assert_side_effect_not_retried(fault, side_effects=mails)


def test_the_kit_catches_a_retry_that_repeats_the_side_effect(ctx: OpContext) -> None:
    fault = faults.raise_after_side_effect(RECEIPT, {"order": 1, "how": "unkeyed"}, ctx=ctx)
    faults.assert_attempt_counted(fault)  # the queue did its part
    with pytest.raises(AssertionError, match=r"the queue retried the item \(the attempt counted\)"):
        faults.assert_side_effect_not_retried(fault, side_effects=mails)


@pytest.mark.django_db(databases=["default", "system", "admin"])
def test_a_fault_inside_a_tests_transaction_says_to_commit_and_runs_nothing(make_ctx) -> None:  # type: ignore[no-untyped-def]
    ctx = make_ctx()
    with pytest.raises(RuntimeError, match=r"django_db\(transaction=True\)"):
        faults.kill_mid_handler(RECEIPT, {"order": 1}, ctx=ctx)
    with pytest.raises(ValueError, match="holds at one of started, returned, not 'later'"):
        HeldWorker(RECEIPT, "default", point="later")
