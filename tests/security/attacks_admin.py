"""Attack rows on the admin: the lists, detail pages and triage actions, by A's staff (the admin
role in A), by users without the role, and against the operator (CSRF).

Each row is refused: A's staff see A's rows only, whatever the filter, search or URL names;
another tenant's item is a 404; triage without the role is refused, and triage by A's staff
never reaches B's item, whatever fence is forged; every state-changing post needs its CSRF
token; and each action's audit entry names who acted, whatever the post claims.
"""

from __future__ import annotations

import copy
import html
import re
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, quote_plus

from django.db import connections
from django.http import HttpResponse
from django.test import Client

from audit.models import AuditEntry
from tenancy.scope import tenant_scope
from tests.factories import MembershipFactory, UserFactory
from tests.helpers import row
from tests.security.table import ATTACKS, Attack, Scene, attack, client_of
from tests.security.world import SECRET, World
from workqueue import api
from workqueue.models import Status
from workqueue.triage import Drawn

ITEMS = "/admin/workqueue/workitem/"
DEAD = "/admin/workqueue/deadletter/"
AUDIT = "/admin/workqueue_audit/auditentry/"
ORGS = "/admin/workqueue_tenancy/org/"
MEMBERS = "/admin/workqueue_tenancy/membership/"
USERS = "/admin/auth/user/"
SHARES = "/admin/workqueue/tenantshare/"
GAUGES = "/admin/workqueue_workers/queuegauges/"

# Each triage action, with what its confirmation page adds.
ACTIONS: dict[str, dict[str, str]] = {
    "requeue_now": {},
    "requeue_later": {"delay_minutes": "1"},
    "discard": {},
    "edit_payload": {"payload": '{"note": "edited"}'},
    "cancel": {},
}


def staff_of_a(world: World, enforce_csrf_checks: bool = False) -> Client:
    """A's staff user (the admin role in A), signed in."""
    client = client_of(world, world.a.staff.user_id)
    client.handler.enforce_csrf_checks = enforce_csrf_checks
    return client


def operator(**client_kwargs: Any) -> Client:
    """The site's operator: a superuser of no tenant."""
    client = Client(**client_kwargs)
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


def forged(action: str, selected: list[Any], fenced: list[Any], **extra: str) -> dict[str, Any]:
    """A confirmed triage post, as the confirmation page would send it, for ``selected``
    items fenced on ``fenced`` items as they are now."""
    return {
        "action": action,
        "_selected_action": [str(item.id) for item in selected],
        "fence": [Drawn.of(item).token() for item in fenced],
        "confirm": "yes",
        **ACTIONS[action],
        **extra,
    }


def b_values(world: World) -> list[str]:
    """What of B's must never show on a page of A's."""
    b = world.b
    ids = (b.org_id, b.user_id, b.staff.user_id, b.parked.id, b.held.id, b.dead.id)
    more = (b.answer_item, b.shipment, b.shipment_work, b.task_id, b.outbox_id)
    return [*map(str, ids + more), b.key, b.answer_key, SECRET]


def nothing_of_b(world: World, response: HttpResponse, echoed: str = "") -> str:
    """The page shows nothing of B's; ``echoed`` (what A typed, e.g. a search term naming B's
    id) may show where the page repeats it, never in the list's rows."""
    page = response.content.decode(errors="replace")
    if echoed:
        rows = re.search(r'<table id="result_list">.*?</table>', page, re.S)
        assert rows is None or not _shows_b(world, rows.group(0)), "B's row is listed"
        for spelled in {echoed, quote_plus(echoed), quote(echoed)}:
            page = page.replace(html.escape(spelled), "").replace(spelled, "")
    for value in b_values(world):
        assert value not in page and html.escape(value) not in page, f"{value} is on the page"
    name = _b_org_name(world)
    assert name not in page, f"B's org's name {name!r} is on the page"
    return page


def _shows_b(world: World, text: str) -> bool:
    return any(v in text or html.escape(v) in text for v in b_values(world))


def _b_org_name(world: World) -> str:
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT name FROM workqueue_tenancy_org WHERE id = %s", [world.b.org_id])
        return cursor.fetchone()[0]


def unchanged_dead(item: api.WorkItem) -> None:
    """A's own dead letter, as it was: still failed, nothing audited after its failure."""
    now = row(item.id)
    assert (now.status, now.updated_at, now.payload) == (
        Status.FAILED,
        item.updated_at,
        item.payload,
    ), (now.status, now.payload)
    entries = AuditEntry.objects.using("admin").filter(subject_id=str(item.id))
    assert set(entries.values_list("action", flat=True)) == {"work.dead_lettered"}


# -- what A's staff see -------------------------------------------------------------------------


def _list_row(path: str, shows_own: Callable[[World], str] | None) -> None:
    def run(scene: Scene) -> None:
        w = scene.world
        response = staff_of_a(w).get(path)
        assert response.status_code == 200, response.status_code
        page = nothing_of_b(w, response)
        if shows_own is not None:  # the list did draw A's rows
            assert shows_own(w) in page

    ATTACKS.append(Attack("admin", f"A's staff read B's rows in {path}", run))


_list_row(ITEMS, lambda w: str(w.a.dead.id))
_list_row(DEAD, lambda w: str(w.a.dead.id))
_list_row(AUDIT, lambda w: str(w.a.dead.id))
_list_row(ORGS, lambda w: str(w.a.org_id))
_list_row(MEMBERS, None)
_list_row(SHARES, None)
_list_row(GAUGES, None)


def _filter_row(path: str) -> None:
    def run(scene: Scene) -> None:
        w = scene.world
        client = staff_of_a(w)
        b = w.b.org_id
        for query in (
            f"org={b}",
            f"org__id__exact={b}",
            f"org_id={b}",
            f"org__exact={b}",
            f"org_id__exact={b}",
            f"org__id__in={b},{w.a.org_id}",
            "org__name__startswith=b-org",
            "org__isnull=False",
            f"payload__note={SECRET}",
        ):
            response = client.get(f"{path}?{query}", follow=True)
            assert response.status_code in (200, 400), (query, response.status_code)
            nothing_of_b(w, response)

    ATTACKS.append(Attack("admin", f"A's staff filter {path} by B's tenant", run))


_filter_row(ITEMS)
_filter_row(DEAD)
_filter_row(AUDIT)


def _search_row(path: str) -> None:
    def run(scene: Scene) -> None:
        w = scene.world
        client = staff_of_a(w)
        for term in (
            "' OR 1=1 --",
            "%' OR '%'='",
            "%",
            "\\",
            "\x00",
            str(w.b.parked.id),
            str(w.b.dead.id),
            f"{{{w.b.dead.id}}}",
            str(w.b.user_id),
            w.b.key,
            w.b.answer_key,
            f"{w.b.key}' OR idempotency_key LIKE '%",
            '{"org_id": "' + str(w.b.org_id) + '"}',
            "x" * 5000,
        ):
            response = client.get(path, {"q": term})
            assert response.status_code == 200, (term, response.status_code)
            nothing_of_b(w, response, echoed=term)

    ATTACKS.append(Attack("admin", f"SQL, wildcards and B's ids in {path}'s search box", run))


_search_row(ITEMS)
_search_row(DEAD)
_search_row(AUDIT)


@attack("admin", "A's staff open B's rows' detail, history and delete pages")
def _b_detail_pages(scene: Scene) -> None:
    w = scene.world
    client = staff_of_a(w)
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT id FROM workqueue_audit_auditentry WHERE org_id = %s", [w.b.org_id])
        entries = [r[0] for r in cursor.fetchall()]
        cursor.execute(
            "SELECT id FROM workqueue_tenancy_membership WHERE org_id = %s", [w.b.org_id]
        )
        memberships = [r[0] for r in cursor.fetchall()]
    urls = [
        f"{base}{obj}/{page}/"
        for base, ids in (
            (ITEMS, [w.b.parked.id, w.b.held.id, w.b.dead.id]),
            (DEAD, [w.b.dead.id]),
            (AUDIT, entries),
            (ORGS, [w.b.org_id]),
            (MEMBERS, memberships),
        )
        for obj in ids
        for page in ("change", "history", "delete")
    ]
    assert len(urls) > 20
    for url in urls:
        response = client.get(url)
        assert response.status_code == 404, (url, response.status_code)
        nothing_of_b(w, response)
    for url in (f"{USERS}{w.b.user_id}/change/", f"{USERS}?_popup=1&_to_field=id"):
        response = client.get(url)
        assert response.status_code == 403, (url, response.status_code)
        nothing_of_b(w, response)


@attack("admin", "A's staff open or cancel B's workflow; their own page shows nothing of B's")
def _b_workflow(scene: Scene) -> None:
    w = scene.world
    client = staff_of_a(w)
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT org_id, workflow_id FROM workqueue_workitem WHERE workflow_id IS NOT NULL"
        )
        workflows = dict(cursor.fetchall())
    theirs, ours = workflows[w.b.org_id], workflows[w.a.org_id]
    page = f"{ITEMS}workflow/{theirs}/"
    assert client.get(page).status_code == 404
    assert client.get(f"{page}cancel/").status_code == 404
    assert client.post(f"{page}cancel/", {"confirm": "yes"}).status_code == 404
    assert row(theirs).status == Status.WAITING
    own = client.get(f"{ITEMS}workflow/{ours}/")
    assert own.status_code == 200
    nothing_of_b(w, own)


@attack("admin", "A's staff read attempts: their dead letter lists its own; B's stay out of reach")
def _attempts(scene: Scene) -> None:
    w = scene.world
    response = staff_of_a(w).get(f"{DEAD}{w.a.dead.id}/change/")
    assert response.status_code == 200
    page = nothing_of_b(w, response)
    assert 'id="attempts"' in page and "a&#x27;s traceback" in page
    # Raw SQL on the everyday login, scoped to A, whatever it names: no attempt of B's.
    with tenant_scope(w.a.org_id), connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM workqueue_attempt WHERE item_id = %s OR org_id = %s"
            " OR traceback LIKE %s",
            [w.b.dead.id, w.b.org_id, f"%{SECRET}%"],
        )
        assert cursor.fetchone()[0] == 0
        cursor.execute("SELECT count(*) FROM workqueue_attempt")
        assert cursor.fetchone()[0] == 1  # A's dead letter's one attempt


@attack("admin", "A's staff name B with X-Org-ID")
def _staff_header(scene: Scene) -> None:
    w = scene.world
    client = staff_of_a(w)
    for url in (ITEMS, f"{DEAD}{w.b.dead.id}/change/"):
        response = client.get(url, HTTP_X_ORG_ID=str(w.b.org_id))
        assert response.status_code == 403, (url, response.status_code)
        nothing_of_b(w, response)
    response = client.post(
        DEAD, forged("discard", [w.b.dead], [w.b.dead]), HTTP_X_ORG_ID=str(w.b.org_id)
    )
    assert response.status_code == 403


# -- triage on B's item ---------------------------------------------------------------------------


def _confirmation_row(action: str) -> None:
    def run(scene: Scene) -> None:
        w = scene.world
        client = staff_of_a(w)
        for url in (DEAD, ITEMS):
            answers = []
            for selected in (str(w.b.dead.id), str(uuid.uuid4())):
                data = {"action": action, "_selected_action": [selected]}
                response = client.post(url, data, follow=True)
                assert response.status_code == 200
                page = nothing_of_b(w, response)
                assert 'name="fence"' not in page, "a confirmation page was drawn for B's item"
                answers.append(messages_of(response))
            # As for an item that never was: no sign that B's exists.
            assert answers[0] == answers[1], answers

    ATTACKS.append(Attack("admin", f"A's staff open {action}'s confirmation for B's item", run))


def messages_of(response: HttpResponse) -> str:
    found = re.search(r'<ul class="messagelist">.*?</ul>', response.content.decode(), re.S)
    return found.group(0) if found else ""


def _triage_row(action: str) -> None:
    def run(scene: Scene) -> None:
        w = scene.world
        client = staff_of_a(w)
        never = copy.copy(w.b.dead)
        never.id = uuid.uuid4()
        # B's item selected (from either list), or A's own selected beside B's fence: the
        # answer is the one an item that never was gets, but for the id A sent.
        for url, b_selected in ((DEAD, True), (ITEMS, True), (DEAD, False)):
            answers = []
            for target in (w.b.dead, never):
                chosen = [target] if b_selected else [w.a.dead]
                response = client.post(url, forged(action, chosen, [target]), follow=True)
                assert response.status_code == 200
                nothing_of_b(w, response, echoed=str(w.b.dead.id))
                answers.append(messages_of(response).replace(str(target.id), "<id>"))
            assert answers[0] == answers[1], answers
        unchanged_dead(w.a.dead)

    ATTACKS.append(Attack("admin", f"A's staff {action} B's item with a forged fence", run))


for _action in ACTIONS:
    _confirmation_row(_action)
    _triage_row(_action)


@attack("admin", "A's staff cancel B's pending and running items with forged fences")
def _cancel_b_items(scene: Scene) -> None:
    w = scene.world
    client = staff_of_a(w)
    for target in (w.b.parked, w.b.held):
        never = copy.copy(target)
        never.id = uuid.uuid4()
        answers = []
        for item in (target, never):
            response = client.post(ITEMS, forged("cancel", [item], [item]), follow=True)
            assert response.status_code == 200
            nothing_of_b(w, response, echoed=str(target.id))
            answers.append(messages_of(response).replace(str(item.id), "<id>"))
        assert answers[0] == answers[1], answers


@attack("admin", "A's staff select B's item beside A's own and confirm")
def _mixed_selection(scene: Scene) -> None:
    w = scene.world
    client = staff_of_a(w)
    data = forged("requeue_now", [w.a.dead, w.b.dead], [w.a.dead, w.b.dead])
    response = client.post(DEAD, data, follow=True)
    assert response.status_code == 200
    assert row(w.a.dead.id).status == Status.PENDING  # A's own: theirs to requeue
    nothing_of_b(w, response, echoed=str(w.b.dead.id))


@attack("admin", "SQL and JSON in the selected ids and the fences")
def _selected_injection(scene: Scene) -> None:
    w = scene.world
    client = staff_of_a(w)
    for selected, fence in (
        ("' OR 1=1 --", Drawn.of(w.b.dead).token()),
        (f"{w.b.dead.id}' OR '1'='1", "x|failed|now"),
        ('{"$ne": null}', f"{w.b.dead.id}|failed|2000-01-01T00:00:00+00:00' OR '1'='1"),
        (str(w.a.dead.id), f"{w.b.dead.id}|failed|{w.b.dead.updated_at.isoformat()}|x"),
    ):
        data = {
            "action": "discard",
            "_selected_action": [selected],
            "fence": [fence],
            "confirm": "yes",
        }
        response = client.post(DEAD, data, follow=True)
        assert response.status_code == 200, (selected, response.status_code)
        nothing_of_b(w, response, echoed=str(w.b.dead.id))
    unchanged_dead(w.a.dead)


def _b_member_too(world: World) -> None:
    """B took A's staff user in as a plain member of B."""
    MembershipFactory(org_id=world.b.org_id, user_id=world.a.staff.user_id, role="member")


@attack(
    "admin",
    "A's staff, a plain member of B too, triage B's item naming B",
    lambda s: _b_member_too(s.world),
)
def _staff_elsewhere(scene: Scene) -> None:
    w = scene.world
    client = staff_of_a(w)
    header = {"HTTP_X_ORG_ID": str(w.b.org_id)}
    for url in (DEAD, ITEMS, f"{DEAD}{w.b.dead.id}/change/"):
        response = client.get(url, **header)
        assert response.status_code == 403, (url, response.status_code)
    for action in ACTIONS:
        response = client.post(DEAD, forged(action, [w.b.dead], [w.b.dead]), **header)
        assert response.status_code == 403, (action, response.status_code)
    # Through the session's org instead of the header: the same member role.
    session = client.session
    session["org_id"] = str(w.b.org_id)
    session.save()
    response = client.post(DEAD, forged("discard", [w.b.dead], [w.b.dead]))
    assert response.status_code == 403, response.status_code


# -- triage without the role -------------------------------------------------------------------


def _role_row(name: str, make: Callable[[World], uuid.UUID], refused: tuple[int, ...]) -> None:
    def run(scene: Scene) -> None:
        w = scene.world
        client = client_of(w, make(w))
        for action in ACTIONS:
            for url in (DEAD, ITEMS):
                response = client.post(url, forged(action, [w.a.dead], [w.a.dead]))
                assert response.status_code in refused, (action, url, response.status_code)
                if response.status_code == 302:
                    assert "/admin/login/" in response["Location"]
        assert client.get(f"{DEAD}{w.a.dead.id}/change/").status_code in refused
        unchanged_dead(w.a.dead)

    ATTACKS.append(Attack("admin", f"{name} triages A's dead letter", run))


def _user_in_a(role: str, staff: bool) -> Callable[[World], uuid.UUID]:
    def make(world: World) -> uuid.UUID:
        user = UserFactory(is_staff=staff)
        MembershipFactory(org_id=world.a.org_id, user=user, role=role)
        return user.pk

    return make


_role_row("A's plain member (not staff)", lambda w: w.a.user_id, (302,))
_role_row("a staff user with the member role", _user_in_a("member", True), (403,))
_role_row("an owner who is not staff", _user_in_a("owner", False), (302,))
_role_row("a staff user of no tenant", lambda w: UserFactory(is_staff=True).pk, (403, 404))


# -- CSRF -------------------------------------------------------------------------------------


def _csrf_row(action: str) -> None:
    def run(scene: Scene) -> None:
        w = scene.world
        client = staff_of_a(w, enforce_csrf_checks=True)
        for url in (DEAD, ITEMS):
            response = client.post(url, forged(action, [w.a.dead], [w.a.dead]))
            assert response.status_code == 403, (url, response.status_code)
            unconfirmed = {"action": action, "_selected_action": [str(w.a.dead.id)]}
            assert client.post(url, unconfirmed).status_code == 403
        unchanged_dead(w.a.dead)

    ATTACKS.append(Attack("admin", f"{action} without the CSRF token", run))


for _action in ACTIONS:
    _csrf_row(_action)


@attack("admin", "the operator forged (no CSRF token) into making A's staff an owner of B")
def _csrf_operator_membership(scene: Scene) -> None:
    w = scene.world
    client = operator(enforce_csrf_checks=True)
    data = {"org": str(w.b.org_id), "user": str(w.a.staff.user_id), "role": "owner"}
    assert client.post(f"{MEMBERS}add/", data).status_code == 403


@attack("admin", "the operator forged (no CSRF token) into changing B's org and share")
def _csrf_operator_org(scene: Scene) -> None:
    w = scene.world
    client = operator(enforce_csrf_checks=True)
    data = {"name": "pwned", "slug": "pwned"}
    assert client.post(f"{ORGS}{w.b.org_id}/change/", data).status_code == 403
    share = {"org": str(w.b.org_id), "weight": "0.01", "max_in_flight": "0"}
    assert client.post(f"{SHARES}add/", share).status_code == 403


@attack("admin", "the operator forged (no CSRF token) into making A's user a superuser")
def _csrf_operator_user(scene: Scene) -> None:
    w = scene.world
    client = operator(enforce_csrf_checks=True)
    data = {"is_superuser": "on", "is_staff": "on", "username": "pwned"}
    assert client.post(f"{USERS}{w.a.user_id}/change/", data).status_code == 403
    assert client.post(f"{USERS}{w.b.user_id}/password/", {"password1": "x"}).status_code == 403
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT is_superuser FROM auth_user WHERE id = %s", [w.a.user_id])
        assert cursor.fetchone()[0] is False


@attack("admin", "A's staff write B's memberships, shares and org")
def _staff_writes(scene: Scene) -> None:
    w = scene.world
    client = staff_of_a(w)
    b = str(w.b.org_id)
    for url, data, refused in (
        (f"{MEMBERS}add/", {"org": b, "user": str(w.a.staff.user_id), "role": "owner"}, 403),
        (f"{SHARES}add/", {"org": b, "weight": "0.01"}, 403),
        (f"{ORGS}add/", {"name": "x", "slug": "x"}, 403),
        (f"{ORGS}{b}/change/", {"name": "pwned", "slug": "pwned"}, 404),
        (f"{USERS}{w.b.user_id}/change/", {"is_superuser": "on"}, 403),
    ):
        response = client.post(url, data)
        assert response.status_code == refused, (url, response.status_code)


# -- who the audit trail names -----------------------------------------------------------------


def _audit_row(action: str) -> None:
    def run(scene: Scene) -> None:
        w = scene.world
        client = staff_of_a(w)
        claims = {
            "actor": str(w.b.user_id),
            "actor_id": str(w.b.user_id),
            "user_id": str(w.b.user_id),
            "org_id": str(w.b.org_id),
            "request_id": str(uuid.uuid4()),
        }
        # Cancel acts on a pending item (A's parked one), the others on A's dead letter.
        mine, url = (w.a.parked, ITEMS) if action == "cancel" else (w.a.dead, DEAD)
        response = client.post(url, forged(action, [mine], [mine], **claims))
        assert response.status_code == 302, response.status_code  # done: A's own item
        assert row(mine.id).status != mine.status
        [entry] = (
            AuditEntry.objects.using("admin")
            .filter(subject_id=str(mine.id))
            .exclude(action="work.dead_lettered")
        )
        assert (entry.actor, entry.org_id) == (w.a.staff.user_id, w.a.org_id), entry.__dict__
        assert entry.request_id != uuid.UUID(claims["request_id"])

    ATTACKS.append(Attack("admin", f"{action}'s audit entry names someone else", run))


for _action in ACTIONS:
    _audit_row(_action)


@attack("admin", "the operator's triage audited as the item's author")
def _operator_audit(scene: Scene) -> None:
    w = scene.world
    user = UserFactory(is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    response = client.post(DEAD, forged("requeue_now", [w.a.dead], [w.a.dead]))
    assert response.status_code == 302
    [entry] = AuditEntry.objects.using("admin").filter(
        subject_id=str(w.a.dead.id), action="work.requeued"
    )
    assert (entry.actor, entry.org_id) == (str(user.pk), w.a.org_id)


@attack("admin", "edit A's dead letter's payload to name B's org")
def _edit_names_b(scene: Scene) -> None:
    w = scene.world
    client = staff_of_a(w)
    for payload in (
        '{"note": "x", "org_id": "' + str(w.b.org_id) + '"}',
        '{"note": "x", "created_by": "' + str(w.b.user_id) + '"}',
    ):
        data = forged("edit_payload", [w.a.dead], [w.a.dead], payload=payload)
        response = client.post(DEAD, data)
        assert response.status_code == 200
        assert "payload." in html.unescape(response.content.decode())
    unchanged_dead(w.a.dead)


# -- triage by filter ---------------------------------------------------------------------------

MATCHING = DEAD + "matching/"


def _filters_naming_b(world: World) -> list[tuple[str, str]]:
    """Query strings that name B (its tenant, its secret in B's dead letter's payload, its
    dead letter's kind, lane, id and error), each with what of it the page may echo back."""
    b = world.b
    error = b.dead.last_error[:40]
    return [
        ("", ""),
        (f"?org={b.org_id}", str(b.org_id)),
        (f"?kind={b.dead.kind}&lane={quote_plus(b.dead.lane)}", b.dead.lane),
        (f"?q={quote_plus(SECRET)}", SECRET),
        (f"?q={b.dead.id}", str(b.dead.id)),
        (f"?q={quote_plus(error)}", error),
        ("?failed_since=2000-01-01", ""),
    ]


@attack("admin", "A's staff requeue and discard by filter, naming B's tenant, kind and error")
def _filter_action_names_b(scene: Scene) -> None:
    w = scene.world
    client = staff_of_a(w)
    for query, echoed in _filters_naming_b(w):
        for action in ("requeue", "discard"):
            page = client.get(f"{MATCHING}{action}/{query}")
            assert page.status_code in (200, 302), (query, page.status_code)
            nothing_of_b(w, page, echoed=echoed)
            # Confirmed as of a moment far ahead (the fence is capped at the database's now).
            done = client.post(
                f"{MATCHING}{action}/{query}",
                {"confirm": "yes", "until": "2999-01-01T00:00:00+00:00"},
                follow=True,
            )
            assert done.status_code == 200, (query, done.status_code)
            nothing_of_b(w, done, echoed=echoed)
    # A's own dead letter was A's to act on; B's stays as it was (the fingerprint checks).
    assert row(w.a.dead.id).status != Status.FAILED


@attack("admin", "A's staff group B's dead letters by kind and error")
def _groups_name_b(scene: Scene) -> None:
    w = scene.world
    client = staff_of_a(w)
    for query, echoed in _filters_naming_b(w):
        page = client.get(f"{DEAD}groups/{query}")
        assert page.status_code in (200, 302), (query, page.status_code)
        nothing_of_b(w, page, echoed=echoed)
        counts = re.findall(r'class="group-items">(\d+)<', page.content.decode())
        assert sum(map(int, counts)) <= 1, (query, counts)  # A's one dead letter at most


@attack(
    "admin",
    "a member without the staff role, and the operator without a CSRF token, filter-requeue",
)
def _filter_action_without_the_right(scene: Scene) -> None:
    w = scene.world
    member = client_of(w)  # A's member: no admin role
    for action in ("requeue", "discard"):
        page = member.get(f"{MATCHING}{action}/")
        assert page.status_code in (302, 403), page.status_code
        done = member.post(
            f"{MATCHING}{action}/", {"confirm": "yes", "until": "2999-01-01T00:00:00+00:00"}
        )
        assert done.status_code in (302, 403), done.status_code
        if done.status_code == 302:
            assert "/admin/login/" in done["Location"]
    forged_post = operator(enforce_csrf_checks=True).post(
        f"{MATCHING}requeue/", {"confirm": "yes", "until": "2999-01-01T00:00:00+00:00"}
    )
    assert forged_post.status_code == 403
    unchanged_dead(w.a.dead)
