"""Naming a tenant outside a request, the one public way: ``with api.tenant(org_or_slug):`` in a
site with tenants, nothing at all in a single-tenant site; a call given no context says what to
pass."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from tenancy.contexts import OpContext
from tenancy.exceptions import NoContext
from tenancy.models import Org
from tenancy.modes import SINGLE_TENANT_ID
from tests import tasks
from workqueue import api
from workqueue.models import WorkItem


def _items() -> list[WorkItem]:
    return list(WorkItem.objects.using("admin").order_by("created_at"))


@pytest.fixture
def single_tenant(committed: None) -> Iterator[None]:
    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "TENANCY": "single"}):
        yield


def test_a_single_tenant_site_names_nothing_anywhere(single_tenant: None) -> None:
    result = tasks.add.enqueue(2, 3)
    item, _ = api.enqueue(api.context(), "NOOP", {})
    assert tasks.add.get_result(result.id).id == result.id
    assert api.result_of(api.context(), item.id) is None
    assert {row.org_id for row in _items()} == {SINGLE_TENANT_ID}


def test_a_site_with_tenants_names_one_by_org_slug_or_id(ctx: OpContext) -> None:
    org = Org.objects.using("admin").get(pk=ctx.org_id)
    for named in (org, org.slug, str(org.pk)):
        with api.tenant(named) as named_ctx:
            assert named_ctx.org_id == org.pk
            result = tasks.add.enqueue(1, 1)
            assert tasks.add.get_result(result.id).id == result.id
    assert [row.org_id for row in _items()] == [org.pk] * 3


def test_a_site_with_tenants_says_how_to_name_one(ctx: OpContext) -> None:
    with pytest.raises(NoContext, match=r"with workqueue\.api\.tenant\(org_or_slug\)"):
        tasks.add.enqueue(1, 2)
    with pytest.raises(ValueError, match="name the one to act for"):
        api.context()
    with pytest.raises(ValueError, match="no org with the slug 'nobody'"):
        api.context("nobody")
    assert _items() == []


@pytest.mark.parametrize("wrong", [None, "acme", 7, uuid.uuid4()])
def test_a_call_given_no_context_says_what_to_pass(ctx: OpContext, wrong: Any) -> None:
    for call in (
        lambda: api.result_of(wrong, uuid.uuid4()),
        lambda: api.enqueue(wrong, "NOOP", {}),
        lambda: api.cancel(wrong, uuid.uuid4()),
    ):
        with pytest.raises(TypeError, match=r"ctx must be a tenant's context.*api\.tenant"):
            call()
    assert _items() == []


def test_the_async_face_says_the_same(ctx: OpContext) -> None:
    with pytest.raises(TypeError, match="result_of: ctx must be a tenant's context"):
        asyncio.run(api.aresult_of(None, uuid.uuid4()))  # type: ignore[arg-type]
