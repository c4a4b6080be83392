"""The operator's console in a real browser (Debian's Chromium driven by Playwright, a real
``runserver`` on the test database), in the admin's light and dark themes:

- a workflow's graph marks its dead step, and that node's link opens the step's triage page;
  a workflow of more than ``GRAPH_MAX`` steps is summarised by level and status instead;
- a read-only viewer reads the triage page, is offered no action, and an action posted anyway
  is refused with the database unchanged;
- the operator's support view of tenant A shows A's dead letters only, tenant B's dead letter
  typed in the URL is a 404, and the audit trail holds each page viewed.

Each page is saved in ``docs/assets/screenshots/console/`` (``<page>-<theme>.png``), where the
documentation shows them.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.db import connections

from audit.models import AuditEntry
from tenancy.contexts import AppType, OpContext, Role, new_request_context
from tenancy.roles import ensure_viewer_group, viewer_group
from tests.e2e.support import CHROMIUM, CHROMIUM_ARGS, MARKS, PASSWORD, fresh_shots
from tests.factories import MembershipFactory, UserFactory
from tests.helpers import dead_letter
from workqueue import api
from workqueue.claim import claim
from workqueue.models import Status, WorkItem
from workqueue.settle import fail
from workqueue.workflows import Workflow
from workqueue.workflows.graph import GRAPH_MAX

pytestmark = MARKS

# No worker serves it: the members wait there, one failed by the test.
LANE = "e2e-console"
ERROR = "PermanentError: the gateway said no"
THEMES = ("light", "dark")


def _person(**fields: Any) -> Any:
    user = UserFactory(**fields)
    user.set_password(PASSWORD)
    user.save(using="admin")
    return user


def _staff_of_a_new_org() -> tuple[Any, OpContext]:
    user = _person(is_staff=True)
    membership = MembershipFactory(user=user, role=Role.ADMIN)
    ctx = OpContext(membership.org_id, user.pk, Role.ADMIN, new_request_context(AppType.WEB))
    return user, ctx


def _items() -> list[tuple[Any, ...]]:
    return list(
        WorkItem.objects.using("admin").order_by("id").values_list("id", "status", "updated_at")
    )


def _sign_in(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def test_the_console_graph_roles_and_support_view(servers: str, worker_rctx, monkeypatch) -> None:
    staff, a = _staff_of_a_new_org()
    _, b = _staff_of_a_new_org()
    wf = Workflow()
    group = wf.group(
        [api.NewItem("NOOP", {"n": n}, lane=LANE) for n in (1, 2, 3)],
        on_success=api.NewItem("NOOP", {"n": 10}, lane=LANE),
    )
    declared = api.enqueue_workflow(a, wf)
    [(item_ctx, held)] = claim(worker_rctx, LANE, ["NOOP"], "e2e", 30, 1)
    fail(item_ctx, held, ERROR, permanent=True)
    dead, waiting = held.id, declared[group.on_success]
    big = Workflow()
    big.group([api.NewItem("NOOP", {"n": n}, lane=LANE) for n in range(GRAPH_MAX + 50)])
    big_id = api.enqueue_workflow(a, big).workflow_id
    theirs = dead_letter(b, worker_rctx, error="B's own gateway")
    operator = _person(is_staff=True, is_superuser=True)
    ensure_viewer_group("admin")
    viewer = _person(is_staff=True)
    viewer.groups.add(Group.objects.using("admin").get(name=viewer_group()))
    connections.close_all()
    shots = fresh_shots("console")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    before = _items()
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for theme in THEMES:
            page = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme=theme)
            page.set_default_timeout(15_000)

            # The graph: the dead member marked, what it holds dashed, its link its triage.
            _sign_in(page, servers, staff.username)
            page.goto(f"{servers}/admin/workqueue/workitem/workflow/{declared.workflow_id}/")
            expect(page.locator("#workflow-graph a.node")).to_have_count(4)
            expect(page.locator(f"#node-{dead}")).to_have_class("node status-failed dead")
            expect(page.locator(f"#node-{waiting}")).to_have_class("node status-waiting held")
            expect(page.locator("#workflow-graph path.edge.held")).to_have_count(1)
            stroke = page.locator(f"#node-{dead} rect").evaluate("r => getComputedStyle(r).stroke")
            assert stroke == {"light": "rgb(186, 33, 33)", "dark": "rgb(227, 95, 95)"}[theme]
            page.locator("#graph").screenshot(path=shots / f"workflow-graph-{theme}.png")
            page.screenshot(path=shots / f"workflow-page-{theme}.png", full_page=True)
            page.click(f"#node-{dead} rect")
            expect(page).to_have_url(f"{servers}/admin/workqueue/deadletter/{dead}/change/")
            expect(page.locator("#last-error")).to_contain_text(ERROR)

            # A large workflow: summarised, no node drawn.
            page.goto(f"{servers}/admin/workqueue/workitem/workflow/{big_id}/")
            expect(page.locator("#graph-summary")).to_contain_text(f"{GRAPH_MAX + 50} steps")
            expect(page.locator("#workflow-graph")).to_have_count(0)
            expect(page.locator("#level-0 .n-pending")).to_have_text(str(GRAPH_MAX + 50))
            page.locator("#graph").screenshot(path=shots / f"workflow-summary-{theme}.png")
            page.context.clear_cookies()

            # The viewer: reads the triage page, no action offered; one posted anyway refused.
            _sign_in(page, servers, viewer.username)
            page.goto(f"{servers}/admin/workqueue/deadletter/{dead}/change/")
            expect(page.locator("#last-error")).to_contain_text(ERROR)
            expect(page.locator("#triage button")).to_have_count(0)
            expect(page.locator("#read-only")).to_be_visible()
            page.screenshot(path=shots / f"viewer-triage-{theme}.png", full_page=True)
            answer = page.evaluate(
                """async ([url, id]) => {
                    const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
                    const body = new URLSearchParams({csrfmiddlewaretoken: token,
                        action: "requeue_now", _selected_action: id, confirm: "yes"});
                    return (await fetch(url, {method: "POST", body})).status;
                }""",
                [f"{servers}/admin/workqueue/deadletter/", str(dead)],
            )
            assert answer == 403
            page.context.clear_cookies()

            # The support view of A: A's dead letters only; B's is a 404; then leave it.
            _sign_in(page, servers, operator.username)
            page.goto(f"{servers}/admin/workqueue_tenancy/org/support/")
            page.screenshot(path=shots / f"support-pick-{theme}.png", full_page=True)
            page.select_option("#id_org", str(a.org_id))
            page.click("#support-begin-button")
            page.goto(f"{servers}/admin/workqueue/deadletter/")
            expect(page.locator("#result_list tbody tr")).to_have_count(1)
            expect(page.locator("#result_list")).to_contain_text(ERROR)
            expect(page.locator("#support-leave")).to_be_visible()
            page.screenshot(path=shots / f"support-dead-letters-{theme}.png", full_page=True)
            missing = page.goto(f"{servers}/admin/workqueue/deadletter/{theirs.id}/change/")
            assert missing is not None and missing.status == 404
            page.goto(f"{servers}/admin/workqueue/deadletter/")
            page.click("#support-leave")
            page.click("#support-leave-button")
            page.goto(f"{servers}/admin/workqueue/deadletter/")
            expect(page.locator("#result_list tbody tr")).to_have_count(2)
            page.close()
        browser.close()

    assert _items() == before, "nothing the viewer posted changed an item"
    entries = AuditEntry.objects.using("admin").filter(action__startswith="support.")
    assert {(e.actor, e.org_id) for e in entries} == {(str(operator.pk), a.org_id)}
    viewed = {(e.data["path"], e.data["status"]) for e in entries if e.action == "support.viewed"}
    assert ("/admin/workqueue/deadletter/", 200) in viewed
    assert (f"/admin/workqueue/deadletter/{theirs.id}/change/", 404) in viewed
    assert [e.action for e in entries].count("support.began") == len(THEMES)
    assert AuditEntry.objects.using("admin").filter(action="work.requeued").count() == 0
    assert WorkItem.objects.using("admin").get(pk=dead).status == Status.FAILED
    saved = sorted(shots.glob("*.png"))
    assert len(saved) == 6 * len(THEMES) and all(s.stat().st_size > 5_000 for s in saved)
