"""Attack rows on the ``django.tasks`` backend (``workers/django_tasks``), from A's side.

The backend takes its tenant from the current context (``tenancy.current``): the signed-in
member's in a view (the tenancy middleware names it), or one named with ``using_context``.
The surfaces an outsider reaches are therefore the request that names the context (its header,
query string and session), the context's end with its request, the result id ``get_result``
takes, and the payload a ``DJANGO_TASK`` item carries (anyone who may enqueue may write one
through the API). An ``OpContext`` itself is made by trusted code only (the middleware from a
live membership, the worker from the item it claimed): naming one is no outsider's input.

Each row is refused: B's result is ``TaskResultDoesNotExist`` however its id is spelled or
asked for; a view never enqueues into B; no context outlives its request; and an item naming
what is not a task of this queue never runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.test import AsyncClient, override_settings

from tenancy.current import current_context, using_context
from tenancy.exceptions import NoContext
from tests import tasks
from tests.helpers import fresh_async_connections, row
from tests.security.attacks_api import post
from tests.security.table import (
    ATTACKS,
    Attack,
    Scene,
    attack,
    client_of,
)
from tests.security.world import SECRET, World
from workers.django_tasks.compat import TaskResultDoesNotExist, default_task_backend
from workers.django_tasks.exceptions import TaskNotRunnable
from workers.django_tasks.handler import Target
from workqueue.models import WorkItem


def tasks_of(org_id: uuid.UUID) -> int:
    return WorkItem.objects.using("admin").filter(org_id=org_id, kind="DJANGO_TASK").count()


def does_not_exist(world: World, read: Callable[[], Any]) -> None:
    """``read()`` in A's context raises ``TaskResultDoesNotExist``, saying nothing of B's."""
    with using_context(world.a.ctx), pytest.raises(TaskResultDoesNotExist) as raised:
        read()
    assert SECRET not in str(raised.value)


@attack("tasks", "get_result of B's task")
def _get_result(scene: Scene) -> None:
    w = scene.world
    does_not_exist(w, lambda: tasks.add.get_result(w.b.task_id))
    does_not_exist(w, lambda: default_task_backend.get_result(w.b.task_id))
    does_not_exist(w, lambda: default_task_backend.get_result(uuid.UUID(w.b.task_id)))


@attack("tasks", "aget_result of B's task")
def _aget_result(scene: Scene) -> None:
    w = scene.world
    fresh_async_connections()
    does_not_exist(w, lambda: asyncio.run(tasks.add.aget_result(w.b.task_id)))


@attack("tasks", "refresh a result of A's with B's id written in")
def _refresh(scene: Scene) -> None:
    w = scene.world
    with using_context(w.a.ctx):
        mine = tasks.add.get_result(w.a.task_id)
    forged = dataclasses.replace(mine, id=w.b.task_id)
    does_not_exist(w, forged.refresh)


@attack("tasks", "get_result of B's task spelled otherwise, or of B's other items")
def _spellings(scene: Scene) -> None:
    w = scene.world
    b = uuid.UUID(w.b.task_id)
    for spelled in (f"{{{b}}}", f"urn:uuid:{b}", str(b).upper(), b.hex, b.bytes, b.int):
        does_not_exist(w, lambda s=spelled: default_task_backend.get_result(s))
    for item_id in (w.b.held.id, w.b.dead.id, w.b.answer_item):
        does_not_exist(w, lambda i=item_id: default_task_backend.get_result(str(i)))


@attack("tasks", "SQL and JSON in the result id")
def _id_injection(scene: Scene) -> None:
    w = scene.world
    for crafted in (
        "' OR '1'='1",
        f"{w.b.task_id}' OR '1'='1",
        f"{w.b.task_id}; DELETE FROM workqueue_workitem",
        '{"id": {"$ne": null}}',
        {"id": w.b.task_id},
        [w.b.task_id],
        None,
        "x" * 10_000,
    ):
        does_not_exist(w, lambda c=crafted: default_task_backend.get_result(c))


@attack("tasks", "read B's result through a view of A's")
def _view_result(scene: Scene) -> None:
    w = scene.world
    with override_settings(ROOT_URLCONF="tests.web_urls"):
        client = client_of(w)
        assert client.get(f"/test/task/{w.a.task_id}/").status_code == 200
        assert client.get(f"/test/task/{w.b.task_id}/").status_code == 404
        named = client.get(f"/test/task/{w.b.task_id}/", HTTP_X_ORG_ID=str(w.b.org_id))
        assert named.status_code == 403


@attack("tasks", "enqueue in a view naming B with X-Org-ID")
def _view_header(scene: Scene) -> None:
    w = scene.world
    before = tasks_of(w.a.org_id)
    with override_settings(ROOT_URLCONF="tests.web_urls"):
        response = client_of(w).post("/test/task/", HTTP_X_ORG_ID=str(w.b.org_id))
    assert response.status_code == 403
    assert tasks_of(w.a.org_id) == before


@attack("tasks", "enqueue in an async view naming B with X-Org-ID")
def _async_view_header(scene: Scene) -> None:
    w = scene.world
    from django.contrib.auth import get_user_model

    User = get_user_model()

    user = User.objects.using("admin").get(pk=w.a.user_id)

    async def go() -> int:
        client = AsyncClient()
        await client.aforce_login(user)
        response = await client.post("/test/atask/", headers={"X-Org-ID": str(w.b.org_id)})
        return response.status_code

    before = tasks_of(w.a.org_id)
    fresh_async_connections()
    with override_settings(ROOT_URLCONF="tests.web_urls"):
        assert asyncio.run(go()) == 403
    assert tasks_of(w.a.org_id) == before


@attack("tasks", "enqueue in a view naming B in the query string and the session")
def _view_query_session(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    session = client.session
    session["org_id"] = str(w.b.org_id)
    session.save()
    with override_settings(ROOT_URLCONF="tests.web_urls"):
        response = client.post(f"/test/task/?org_id={w.b.org_id}", {"org_id": str(w.b.org_id)})
    assert response.status_code == 201
    item = row(uuid.UUID(response.content.decode()))
    assert (item.org_id, item.created_by) == (w.a.org_id, w.a.user_id)


def _after_b_request(scene: Scene) -> None:
    """B's member's request ran in this thread (the test client's), enqueueing a task."""
    w = scene.world
    with override_settings(ROOT_URLCONF="tests.web_urls"):
        response = client_of(w, w.b.user_id).get(f"/test/task/{w.b.task_id}/")
    assert response.status_code == 200


@attack(
    "tasks", "enqueue and read with no context, after B's request in this thread", _after_b_request
)
def _context_outlives_request(scene: Scene) -> None:
    w = scene.world
    assert current_context() is None
    with pytest.raises(NoContext):
        tasks.add.enqueue(5, 6)
    with pytest.raises(NoContext):
        tasks.add.get_result(w.b.task_id)
    with pytest.raises(NoContext):
        asyncio.run(tasks.add.aenqueue(5, 6))


@attack("tasks", "a context named inside a block does not outlive it")
def _context_outlives_block(scene: Scene) -> None:
    w = scene.world
    with using_context(w.a.ctx):
        with pytest.raises(RuntimeError):
            with using_context(w.a.staff):
                raise RuntimeError("the block fails")
        assert current_context() is w.a.ctx
    assert current_context() is None
    with pytest.raises(TypeError):
        with using_context(w.b.org_id):  # type: ignore[arg-type]
            pass
    with pytest.raises(NoContext):
        tasks.add.enqueue(7, 8)


def _payload_row(name: str, payload: dict[str, Any], says: str) -> None:
    def run(scene: Scene) -> None:
        w = scene.world
        body = {"kind": "DJANGO_TASK", "payload": payload, "lane": "sec-parked"}
        response = post(client_of(w), body)
        if response.status_code == 400:  # refused at the door: fine
            return
        assert response.status_code == 201, response.content
        item = row(uuid.UUID(response.json()["item"]["id"]))
        assert item.org_id == w.a.org_id
        # What a worker does with it: refuses it for good, before anything runs.
        with pytest.raises(TaskNotRunnable, match=says):
            Target.of(api_item(item))

    ATTACKS.append(Attack("tasks", name, run))


def api_item(item: WorkItem) -> Any:
    from workqueue import api

    return api.WorkItem.objects.using("admin").get(pk=item.pk)


_payload_row(
    "a task item through the API naming a standard-library function",
    {"path": "os.system", "args": ["touch /tmp/pwned"]},
    "names no task module",
)
_payload_row(
    "a task item through the API naming a function that is not a task",
    {"path": "django.core.management.call_command", "args": ["flush", "--noinput"]},
    "not a task",
)
_payload_row(
    "a task item through the API naming a backend that is not this queue's",
    {"path": "tests.tasks.add", "args": [1, 2], "backend": "immediate"},
    "not configured",
)
