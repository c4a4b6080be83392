"""``WORKQUEUE["TENANT_NAMING"] = "set_local"`` (what Citus needs) on one server: the same
results as the default ``set_config``, which costs nothing more than before.

The row-level security, enqueue, outbox, workflow-step and claim-and-settle tests (on both
faces) run again here, every one in set_local mode; the tests below check what each mode sends.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.db import connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from outbox.emit import EMIT
from tenancy.models import Membership
from tenancy.scope import deferred_tenant_scope, tenant_scope
from tests.contract.test_claim_and_settle import *  # noqa: F403
from tests.contract.test_enqueue import *  # noqa: F403
from tests.contract.test_outbox import *  # noqa: F403
from tests.contract.test_row_level_security import *  # noqa: F403
from tests.contract.test_workflow_steps import *  # noqa: F403
from tests.factories import MembershipFactory, OrgFactory
from workqueue.checks import naming_problem
from wqcore.async_face import preamble
from wqcore.plans import Tenant
from wqcore.scope import SET_TENANT, set_local_tenant, tenant_naming

pytestmark = pytest.mark.usefixtures("committed", "set_local")


@pytest.fixture
def set_local() -> Iterator[None]:
    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "TENANT_NAMING": "set_local"}):
        yield


def _sent(block_org: uuid.UUID) -> list[str]:
    with CaptureQueriesContext(connections["default"]) as queries:
        with tenant_scope(block_org):
            Membership.objects.count()
    return [q["sql"] for q in queries.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]


def test_set_local_names_the_tenant_with_its_own_statement() -> None:
    org = OrgFactory()
    sent = _sent(org.pk)
    assert sent[0] == f"SET LOCAL app.org_id = '{org.pk}'"
    assert not any("set_config" in sql for sql in sent)


def test_set_config_stays_the_default_and_sends_what_it_sent() -> None:
    org = OrgFactory()
    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "TENANT_NAMING": "set_config"}):
        sent = _sent(org.pk)
        assert tenant_naming(org.pk) == (SET_TENANT, {"org_id": str(org.pk)})
    assert "set_config" in sent[0] and len(sent) == 2


def test_both_modes_see_the_same_rows() -> None:
    a, b = OrgFactory(), OrgFactory()
    MembershipFactory.create_batch(2, org=a)
    MembershipFactory(org=b)
    seen = {}
    for mode in ("set_config", "set_local"):
        with override_settings(WORKQUEUE={**settings.WORKQUEUE, "TENANT_NAMING": mode}):
            counts = []
            for org in (a, b):
                with tenant_scope(org.pk):
                    counts.append(Membership.objects.count())
                with deferred_tenant_scope(org.pk):
                    counts.append(Membership.objects.count())
            seen[mode] = counts
    assert seen["set_config"] == seen["set_local"] == [2, 2, 1, 1]


def test_a_statement_that_names_its_tenant_gains_the_naming_only_in_set_local_mode() -> None:
    """The hot path on one server: a statement that names its tenant itself (the outbox's emit)
    goes alone in the default mode; in set_local mode SET LOCAL goes before it."""
    org_id = uuid.uuid4()
    step = Tenant(org_id, EMIT, EMIT.params._make([None] * len(EMIT.params._fields)))
    assert EMIT.names_tenant
    assert preamble(step, False, False) == [(set_local_tenant(org_id), None)]
    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "TENANT_NAMING": "set_config"}):
        assert preamble(step, False, False) == []


@pytest.mark.parametrize("bad", ["x'; RESET ROLE; --", "", "not-a-uuid"])
def test_only_a_uuid_is_quoted_into_set_local(bad: str) -> None:
    if bad == "":
        assert set_local_tenant(bad) == "SET LOCAL app.org_id = ''"
        return
    with pytest.raises(ValueError):
        set_local_tenant(bad)


def test_one_server_has_no_naming_problem_in_either_mode() -> None:
    assert naming_problem("default") is None
    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "TENANT_NAMING": "set_config"}):
        assert naming_problem("default") is None
