"""manage.py scenario before|after: what a Django team checks after adding the queue to its site.

Runs inside the site, with Django's test client against the site's own URLs and admin. Each
step prints one JSON line of what it found; a failed check raises (the command exits non-zero).
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import connection
from django.template.loader import select_template
from django.test import Client

from shop.models import Order, Seat, Team
from workers import testing
from workqueue.api import Status, WorkItem

User = get_user_model()
DEAD = "/admin/workqueue/deadletter/"
AUDIT = "/admin/workqueue_audit/auditentry/"


def mode() -> str:
    tenancy = settings.WORKQUEUE.get("TENANCY", "single")
    return tenancy if tenancy in ("single", "orgs") else "site"


def client_of(user: Any | None) -> Client:
    client = Client(raise_request_exception=False)
    if user is not None:
        client.force_login(user)
    return client


def checkout(client: Client, number: str, then: str = "") -> tuple[int, dict[str, Any]]:
    response = client.post("/checkout/", {"number": number, "then": then})
    body = (
        response.json()
        if response.headers.get("Content-Type", "").startswith("application/json")
        else {}
    )
    return response.status_code, body


def every_item() -> list[WorkItem]:
    return testing.enqueued(status="*")


class Command(BaseCommand):
    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("step", choices=["before", "after"])

    def handle(self, *args: Any, step: str, **options: Any) -> None:
        found = getattr(self, step)()
        self.stdout.write(json.dumps(found, default=str))

    # -- before the worker runs -----------------------------------------------------------------

    def people(self) -> dict[str, Any]:
        """Two tenants' members (one tenant on a single-tenant site), and the operator."""
        operator = User.objects.create_superuser("operator", "op@example.com", "pw-operator-1")
        a = User.objects.create_user("alice", "a@example.com", "pw")
        b = User.objects.create_user("bob", "b@example.com", "pw")
        if mode() == "orgs":
            # The orgs tenancy's own app: its orgs and memberships are the site's to make.
            from tenancy.contexts import Role
            from tenancy.models import Membership, Org
            from tenancy.scope import tenant_scope

            owner = settings.WORKQUEUE.get("OWNER_DATABASE_ALIAS")
            for user, slug in ((a, "org-a"), (b, "org-b")):
                org = Org.objects.using(owner).create(name=slug, slug=slug)
                with tenant_scope(org.pk, using=owner):
                    Membership.objects.using(owner).create(
                        org_id=org.pk, user_id=user.pk, role=Role.MEMBER
                    )
        elif mode() == "site":
            for user, name in ((a, "team-a"), (b, "team-b")):
                Seat.objects.create(user=user, team=Team.objects.create(name=name))
        return {"operator": operator, "a": a, "b": b}

    def before(self) -> dict[str, Any]:
        # The site's own table, read and written by its own login as before.
        Order.objects.create(number="0001")
        assert Order.objects.get(number="0001").paid is False
        people = self.people()
        a, b = client_of(people["a"]), client_of(people["b"])
        ok, first = checkout(a, "1001")
        assert ok == 200, (ok, first)
        bad, dead = checkout(a, "bad")
        assert bad == 200, bad
        failed, _ = checkout(a, "1002", then="fail")
        assert failed == 500, failed
        assert not Order.objects.filter(number="1002").exists(), "the failed view's order stayed"
        ok_b, second = checkout(b, "2001")
        assert ok_b == 200, (ok_b, second)
        if mode() == "single":
            anonymous, _ = checkout(client_of(None), "3001")
            assert anonymous == 200, anonymous
        items = every_item()
        # The failed view's item rolled back with its order: three (four) items, no more.
        assert len(items) == (4 if mode() == "single" else 3), [i.payload for i in items]
        # The site's @task, enqueued for A's tenant through the queue's TASKS backend.
        reported = a.post("/report/", {"prefix": "000"})
        assert reported.status_code == 200, reported.status_code
        return {
            "a_item": first["item"],
            "dead": dead["item"],
            "b_item": second["item"],
            "task_api": reported.json()["api"],
        }

    # -- after the worker ran -------------------------------------------------------------------

    def after(self) -> dict[str, Any]:
        assert Order.objects.get(number="1001").paid is True, "the handler did not run"
        assert Order.objects.get(number="2001").paid is True
        items = {str(i.id): i for i in every_item()}
        dead = [i for i in items.values() if i.status == Status.FAILED]
        assert [i.payload["order"] for i in dead] == ["bad"], [
            (i.status, i.payload) for i in items.values()
        ]
        assert dead[0].last_error.startswith("PermanentError: no order bad"), dead[0].last_error
        found: dict[str, Any] = {"mode": mode()}
        found.update(self.isolation(items))
        found.update(self.task(items))
        found.update(self.triage(dead[0]))
        found.update(self.look())
        return found

    def isolation(self, items: dict[str, WorkItem]) -> dict[str, Any]:
        """Each tenant sees its own items only, through row-level security."""
        tenants = {i.org_id for i in items.values()}
        if mode() == "single":
            assert len(tenants) == 1, tenants
            return {"tenants": 1}
        assert len(tenants) == 2, tenants
        seen = {}
        for org_id in tenants:
            with testing.tenant(org_id):
                seen[str(org_id)] = sorted(str(i.id) for i in WorkItem.objects.all())
        mine = {str(org): sorted(k for k, i in items.items() if i.org_id == org) for org in tenants}
        assert seen == mine, (seen, mine)
        # And with no tenant named, a forgotten filter sees nothing.
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM workqueue_workitem")
            assert cursor.fetchone()[0] == 0, "rows seen with no tenant named"
        # The API: B's item is not A's to read.
        a = client_of(User.objects.get(username="alice"))
        b_item = next(k for k, i in items.items() if i.payload.get("order") == "2001")
        assert a.get(f"/api/work/{b_item}").status_code == 404
        return {"tenants": 2}

    def task(self, items: dict[str, WorkItem]) -> dict[str, Any]:
        """The site's @task ran on the worker; A reads its result back through the backend."""
        [task_id] = [k for k, i in items.items() if i.kind == "DJANGO_TASK"]
        a = client_of(User.objects.get(username="alice"))
        answer = a.get(f"/report/{task_id}/")
        assert answer.status_code == 200, answer.status_code
        assert answer.json() == {"status": "SUCCESSFUL", "value": 1}, answer.json()
        return {"task": answer.json()["status"]}

    def triage(self, dead: WorkItem) -> dict[str, Any]:
        """The operator finds the dead letter in the site's admin and requeues it (audited)."""
        operator = client_of(User.objects.get(username="operator"))
        listed = operator.get(DEAD)
        assert listed.status_code == 200, listed.status_code
        assert str(dead.id)[-12:] in listed.text, "the dead letter is not listed"
        page = operator.post(DEAD, {"action": "requeue_now", "_selected_action": [str(dead.id)]})
        assert page.status_code == 200, page.status_code
        fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text)
        data: dict[str, list[str]] = {}
        for name, value in fields:
            data.setdefault(name, []).append(value.replace("&quot;", '"'))
        data.pop("csrfmiddlewaretoken", None)
        done = operator.post(DEAD, data)
        assert done.status_code == 302, done.status_code
        [now] = [i for i in testing.enqueued(status="*") if i.id == dead.id]
        assert now.status == Status.PENDING, now.status
        # The audit trail, as the operator reads it: the entry names the operator.
        trail = operator.get(AUDIT, {"q": str(dead.id)})
        assert trail.status_code == 200, trail.status_code
        assert "work.requeued" in trail.text and ">operator<" in trail.text, trail.text[-3000:]
        return {"requeued": str(dead.id), "audited_actor": "operator"}

    def look(self) -> dict[str, Any]:
        """The site's own admin pages are drawn by Django's own templates: ours change only the
        queue's model pages."""
        origins = {}
        for name in ("index", "pagination", "search_form", "change_list"):
            template = select_template(
                [f"admin/shop/order/{name}.html", f"admin/shop/{name}.html", f"admin/{name}.html"]
            )
            origins[name] = template.origin.name
            assert "/django/contrib/admin/" in origins[name], origins
        operator = client_of(User.objects.get(username="operator"))
        index = operator.get("/admin/")
        assert index.status_code == 200 and "Site administration" in index.text
        assert "/admin/shop/order/" in index.text and "/admin/workqueue/deadletter/" in index.text
        orders = operator.get("/admin/shop/order/")
        assert orders.status_code == 200 and "0001" in orders.text
        return {"templates": "django"}
