"""manage.py queue stats / requeue / discard: the admin's triage by filter from the command
line (the same fenced, audited path), and the queue's numbers for scripts."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.db import connections

from audit.models import AuditEntry
from tenancy.contexts import OpContext
from tests.factories import UserFactory
from tests.helpers import many_dead, row
from workqueue import api
from workqueue.models import Status, WorkItem
from wqcore.actor import SYSTEM_ACTOR

BAD_DEPLOY = "PermanentError: shipment not found"


def _statuses(ids) -> dict[str, int]:  # type: ignore[no-untyped-def]
    counts: dict[str, int] = {}
    for status in (
        WorkItem.objects.using("admin").filter(pk__in=ids).values_list("status", flat=True)
    ):
        counts[status] = counts.get(status, 0) + 1
    return counts


def _queue(capsys, *args: str) -> str:  # type: ignore[no-untyped-def]
    call_command("queue", *args)
    return capsys.readouterr().out


def test_requeue_five_thousand_by_kind_error_and_time(ctx: OpContext, make_ctx, capsys) -> None:  # type: ignore[no-untyped-def]
    other = make_ctx()
    ids = many_dead(ctx.org_id, 3000, error=BAD_DEPLOY)
    ids += many_dead(other.org_id, 2000, error=BAD_DEPLOY)
    older = many_dead(ctx.org_id, 5, error=BAD_DEPLOY, failed_s_ago=3 * 86400)
    unrelated = many_dead(ctx.org_id, 4, error="KeyError: 'sku'")
    user = UserFactory(username="ops-ann")
    filter_args = (
        "--kind",
        "NOOP",
        "--error-contains",
        "shipment not found",
        "--failed-since",
        "1d",
    )
    dry = json.loads(_queue(capsys, "requeue", *filter_args, "--dry-run", "--json"))
    assert (dry["matching"], dry["tenants"], dry["dry_run"]) == (5000, 2, True)
    assert dry["groups"] == [{"kind": "NOOP", "error": BAD_DEPLOY, "items": 5000}]
    assert _statuses(ids) == {"failed": 5000}
    # Fenced on the dry run's moment: an item that fails again after it is left alone.
    with connections["admin"].cursor() as cursor:
        cursor.execute("UPDATE workqueue_workitem SET updated_at = now() WHERE id = %s", [ids[3]])
    out = _queue(
        capsys, "requeue", *filter_args, "--as-of", dry["as_of"], "--user", "ops-ann", "--json"
    )
    done = json.loads(out.splitlines()[-1])
    assert (done["changed"], done["done"]) == (4999, True)
    assert _statuses(ids) == {"pending": 4999, "failed": 1}
    assert row(ids[3]).status == Status.FAILED
    assert _statuses(older) == {"failed": 5} and _statuses(unrelated) == {"failed": 4}
    entries = AuditEntry.objects.using("admin").filter(action="work.requeued")
    assert entries.count() == 4999
    assert set(entries.values_list("actor", flat=True)) == {str(user.pk)}
    assert entries.filter(org_id=other.org_id).count() == 2000


def test_discard_in_words_and_the_system_actor_by_default(ctx: OpContext, capsys) -> None:
    ids = many_dead(ctx.org_id, 30, error=BAD_DEPLOY, lane="imports")
    out = _queue(capsys, "discard", "--lane", "imports", "--tenant", str(ctx.org_id))
    assert "discard: 30 dead letter(s) match lane='imports'" in out
    assert "discard: done for 30 item(s)" in out
    assert _statuses(ids) == {"discarded": 30}
    actors = AuditEntry.objects.using("admin").filter(action="work.discarded")
    assert set(actors.values_list("actor", flat=True)) == {SYSTEM_ACTOR}
    assert actors.first().data["filter"]["lane"] == "imports"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "no filter given"),
        (("--failed-since", "yesterday"), "--failed-since: must be a timestamp"),
        (("--tenant", "acme"), "--tenant: no org with the slug 'acme'"),
        (("--kind", "NOOP", "--user", "nobody-here"), "--user: no user 'nobody-here'"),
        (("--error-contains", "x" * 300), "--error-contains: at most 200 characters"),
        (("--kind", "NOOP", "--as-of", "soon"), "--as-of: must be a timestamp"),
    ],
)
def test_a_bad_option_is_one_line_and_changes_nothing(ctx: OpContext, args, says) -> None:  # type: ignore[no-untyped-def]
    ids = many_dead(ctx.org_id, 3)
    with pytest.raises(CommandError, match=says):
        call_command("queue", "requeue", *args)
    assert _statuses(ids) == {"failed": 3}


def test_stats_json_for_scripts(ctx: OpContext, worker_rctx, capsys) -> None:
    for _ in range(3):
        api.enqueue(ctx, "NOOP", {})
    many_dead(ctx.org_id, 7, error=BAD_DEPLOY)
    stats = json.loads(_queue(capsys, "stats", "--json"))
    assert stats["by_status"] == {"pending": 3, "failed": 7}
    assert {"lane": "default", "kind": "NOOP", "status": "pending", "items": 3} in stats["depth"]
    assert stats["dead_letters"] == 7
    assert stats["dead_letter_groups"][0]["items"] == 7
    assert stats["dead_letter_groups"][0]["error"] == BAD_DEPLOY
    assert stats["lanes"][0]["lane"] == "default" and stats["lanes"][0]["due"] == 3
    assert stats["oldest_age_s"] >= 0
    mine = json.loads(_queue(capsys, "stats", "--json", "--tenant", str(ctx.org_id)))
    assert mine["by_status"] == stats["by_status"]
    words = _queue(capsys, "stats")
    assert "dead letters: 7" in words and BAD_DEPLOY in words
