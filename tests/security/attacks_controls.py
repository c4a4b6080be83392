"""Attack rows on the claim's controls (issue 20): concurrency keys are a tenant's own (A taking
B's key neither waits for B's item nor holds B's up), a forged key is refused by name and stores
nothing, and pausing is the site operator's alone (A's staff can neither pause nor resume, in the
admin or through ``manage.py queue``, and the everyday login cannot reach the pause table)."""

from __future__ import annotations

from io import StringIO

from django.core.management import CommandError, call_command

from audit.models import AuditEntry
from tenancy.contexts import AppType, new_request_context
from tests.helpers import row
from tests.security.attacks_admin import staff_of_a
from tests.security.attacks_api import NOOP, a_rows, post, refused
from tests.security.table import Scene, attack, client_of
from workqueue import api
from workqueue.claim import claim
from workqueue.models import Pause, Status
from workqueue.pauses import SITE_ORG_ID, pause

# A lane of the rows' own: their claims reach no other row of either world.
KEYED_LANE = "sec-keyed"
SHARED_KEY = "shipment:42"
PAUSED_LANE = "default"


def _b_holds_the_key(scene: Scene) -> None:
    """B's own doing: B's item of the key is claimed, and B's next one waits behind it."""
    b = scene.world.b
    api.enqueue(b.ctx, "NOOP", {"n": 1}, lane=KEYED_LANE, concurrency_key=SHARED_KEY)
    api.enqueue(b.ctx, "NOOP", {"n": 2}, lane=KEYED_LANE, concurrency_key=SHARED_KEY)
    rctx = new_request_context(AppType.WORKER)
    assert len(claim(rctx, KEYED_LANE, ["NOOP"], "b-worker", 600, 10)) == 1


@attack(
    "enqueue",
    "take B's concurrency key: A's item neither waits for B's nor holds B's up",
    _b_holds_the_key,
)
def _b_key(scene: Scene) -> None:
    a = scene.world.a
    mine, _ = api.enqueue(a.ctx, "NOOP", {}, lane=KEYED_LANE, concurrency_key=SHARED_KEY)
    rctx = new_request_context(AppType.WORKER)
    claimed = claim(rctx, KEYED_LANE, ["NOOP"], "a-worker", 600, 10)
    # A's item runs beside B's claimed one: keys are per tenant. B's waiting item still waits
    # for B's own, not for A's.
    assert [item.id for _ctx, item in claimed] == [mine.id]
    assert row(mine.id).status == Status.CLAIMED


@attack("api", "a forged concurrency key: too long, NUL, not text, an object: 400, nothing stored")
def _forged_key(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    before = a_rows(w)
    for key in ("k" * 201, "a\x00b", 7, {"org_id": str(w.b.org_id)}, ["x"], True):
        refused(w, post(client, {**NOOP, "concurrency_key": key}), 400, "concurrency_key")
    assert a_rows(w) == before


def _no_pause_and_no_entry() -> None:
    assert not Pause.objects.using("admin").filter(paused_by__startswith="attacker").exists()
    assert (
        not AuditEntry.objects.using("admin")
        .filter(org_id=SITE_ORG_ID, action="queue.resumed")
        .exists()
    )


def _operator_paused(scene: Scene) -> None:
    pause("the-operator", "default", "NOOP", reason="maintenance")


@attack("admin", "A's staff pause a lane, or resume one the operator paused", _operator_paused)
def _staff_pause(scene: Scene) -> None:
    client = staff_of_a(scene.world)
    assert client.get("/admin/workqueue/pause/").status_code == 403
    assert client.post("/admin/workqueue/pause/add/", {"lane": PAUSED_LANE}).status_code == 403
    held = Pause.objects.using("admin").get()
    forged = {"action": "resume_selected", "_selected_action": [str(held.pk)]}
    assert client.post("/admin/workqueue/pause/", forged).status_code == 403
    assert Pause.objects.using("admin").filter(kind="NOOP").count() == 1
    assert Pause.objects.using("admin").filter(kind="").count() == 0
    _no_pause_and_no_entry()


@attack("admin", "A's staff pause or resume through manage.py queue --user", _operator_paused)
def _staff_cli(scene: Scene) -> None:
    from django.contrib.auth import get_user_model

    staff = get_user_model().objects.using("admin").get(pk=scene.world.a.staff.user_id)
    for args in (("pause", "default"), ("resume", "default:NOOP")):
        try:
            call_command("queue", *args, "--user", staff.get_username(), stdout=StringIO())
        except CommandError as exc:
            assert "is not an active superuser" in str(exc)
        else:
            raise AssertionError(f"queue {args[0]} ran as A's staff")
    assert Pause.objects.using("admin").filter(kind="NOOP").count() == 1
    assert Pause.objects.using("admin").filter(kind="").count() == 0
    _no_pause_and_no_entry()
