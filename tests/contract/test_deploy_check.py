"""The deploy check: what is queued that the code about to run cannot run (an unknown kind, a
payload its kind's schema now refuses), reported by ``manage.py check --database`` and by
``manage.py queue check-deploy`` (exit 1), and nothing reported once the queue holds only what
the code runs."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.core.management.base import SystemCheckError
from django.db import connections

from tenancy.contexts import OpContext
from tests.helpers import many_dead
from workqueue import api


def _as_old_code_left_it(item_id, kind: str | None = None, payload: str | None = None) -> None:  # type: ignore[no-untyped-def]
    """An item as a release before this one enqueued it: another kind's name, another shape."""
    sets, params = [], []
    if kind is not None:
        sets.append("kind = %s")
        params.append(kind)
    if payload is not None:
        sets.append("payload = %s::jsonb")
        params.append(payload)
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            f"UPDATE workqueue_workitem SET {', '.join(sets)} WHERE id = %s", [*params, item_id]
        )


def _check_deploy(capsys, *args: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    try:
        call_command("queue", "check-deploy", *args)
    except CommandError as exc:
        return exc.returncode, capsys.readouterr().out + str(exc)
    return 0, capsys.readouterr().out


def test_a_clean_queue_passes(ctx: OpContext, capsys) -> None:  # type: ignore[no-untyped-def]
    api.enqueue(ctx, "NOOP", {"n": 1})
    code, out = _check_deploy(capsys)
    assert code == 0 and "nothing queued that this code cannot run" in out, out
    call_command("check", databases=["default"], tags=["queued_work"], fail_level="WARNING")


def test_a_removed_kind_and_a_changed_schema_are_reported_with_the_ways_out(  # type: ignore[no-untyped-def]
    ctx: OpContext, make_ctx, capsys
) -> None:
    other = make_ctx()
    pending = [api.enqueue(ctx, "NOOP", {"n": n})[0].id for n in range(3)]
    for item_id in pending:
        _as_old_code_left_it(item_id, kind="SEND_FAX")
    many_dead(other.org_id, 2, kind="SEND_FAX")
    reshaped, _ = api.enqueue(other, "NOOP", {"n": 9})
    _as_old_code_left_it(reshaped.id, payload='{"n": "nine"}')
    for n in range(4):
        api.enqueue(ctx, "NOOP", {"n": n})

    code, out = _check_deploy(capsys)
    assert code == 1, out
    assert "kind 'SEND_FAX': 5 queued items (failed 2, pending 3) and no code registers it" in out
    assert "manage.py queue cancel --kind SEND_FAX" in out
    assert "manage.py queue discard --kind SEND_FAX" in out
    sampled = "kind 'NOOP': 1 of 5 queued payloads sampled no longer validate"
    assert f"{sampled} (item {reshaped.id}:" in out

    found = json.loads(_check_deploy(capsys, "--json")[1].split("\n")[0])
    assert found["unknown_kinds"] == [{"kind": "SEND_FAX", "items": {"failed": 2, "pending": 3}}]
    [invalid] = found["invalid_payloads"]
    assert (invalid["kind"], invalid["sampled"], invalid["invalid"]) == ("NOOP", 5, 1)
    assert invalid["first_id"] == str(reshaped.id)
    assert invalid["first_error"].startswith("payload.n")
    # Without a sample, only the kinds are compared.
    assert "NOOP" not in _check_deploy(capsys, "--sample", "0")[1]

    # Django's own check, as a pipeline runs it: warnings, and an error at --fail-level WARNING.
    with pytest.raises(SystemCheckError) as raised:
        call_command("check", databases=["default"], tags=["queued_work"], fail_level="WARNING")
    assert "workqueue.W010" in str(raised.value) and "workqueue.W011" in str(raised.value)
    # A plain check names no database: it never reads the queue.
    call_command("check", fail_level="WARNING")


def test_the_documented_way_out_leaves_it_clean(ctx: OpContext, capsys) -> None:  # type: ignore[no-untyped-def]
    pending = [api.enqueue(ctx, "NOOP", {"n": n})[0].id for n in range(2)]
    for item_id in pending:
        _as_old_code_left_it(item_id, kind="SEND_FAX")
    assert _check_deploy(capsys)[0] == 1
    call_command("queue", "cancel", "--kind", "SEND_FAX")
    capsys.readouterr()
    assert _check_deploy(capsys)[0] == 0


def test_a_bad_sample_is_one_clear_message(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CommandError, match="--sample: must be 0 or more, got -1"):
        call_command("queue", "check-deploy", "--sample", "-1")
