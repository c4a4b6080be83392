"""Django's task API in views: the tenant comes from the signed-in member (the middleware)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from django.test import AsyncClient, Client, override_settings

from tenancy.current import current_context
from tests.factories import MembershipFactory, UserFactory
from workqueue.models import WorkItem

pytestmark = pytest.mark.usefixtures("committed", "web_urls")


@pytest.fixture
def web_urls() -> Iterator[None]:
    with override_settings(ROOT_URLCONF="tests.web_urls"):
        yield


def _client(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def test_a_view_enqueues_for_the_signed_in_members_tenant() -> None:
    member = MembershipFactory()
    response = _client(member.user).post("/test/task/")
    assert response.status_code == 201
    item = WorkItem.objects.using("admin").get(pk=response.content.decode())
    assert (item.org_id, item.created_by, item.kind) == (
        member.org_id,
        str(member.user_id),
        "DJANGO_TASK",
    )
    assert current_context() is None  # the request's context ended with it


def test_a_view_that_raises_after_enqueueing_leaves_nothing() -> None:
    member = MembershipFactory()
    client = _client(member.user)
    client.raise_request_exception = False
    assert client.post("/test/task/?fail=1").status_code == 500
    assert WorkItem.objects.using("admin").count() == 0


def test_a_result_shows_in_its_tenants_views_only() -> None:
    member, stranger_member = MembershipFactory(), MembershipFactory()
    result_id = _client(member.user).post("/test/task/").content.decode()
    assert _client(member.user).get(f"/test/task/{result_id}/").content == b"READY"
    assert _client(stranger_member.user).get(f"/test/task/{result_id}/").status_code == 404


def test_a_user_of_no_tenant_is_refused_and_nothing_is_stored() -> None:
    client = _client(UserFactory())
    client.raise_request_exception = False
    assert client.post("/test/task/").status_code == 500
    assert WorkItem.objects.using("admin").count() == 0


def test_an_async_view_enqueues_with_aenqueue() -> None:
    member = MembershipFactory()

    async def go() -> tuple[int, str]:
        client = AsyncClient()
        await client.aforce_login(member.user)
        response = await client.post("/test/atask/")
        return response.status_code, response.content.decode()

    status, result_id = asyncio.run(go())
    assert status == 201
    item = WorkItem.objects.using("admin").get(pk=result_id)
    assert (item.org_id, item.payload["args"]) == (member.org_id, [3, 4])
