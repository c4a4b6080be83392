"""The product's own tables on Citus, laid out by ``manage.py citus_distribute``."""

from __future__ import annotations

import io

import psycopg
import pytest
from django.core.management import CommandError, call_command

from workqueue.citus import REFERENCE_TABLES, TENANT_TABLES, shard_fences


def test_every_tenant_table_is_distributed_and_colocated(
    product: dict[str, str], coordinator: psycopg.Connection
) -> None:
    rows = dict(
        coordinator.execute(
            "SELECT logicalrelid::regclass::text,"
            " partmethod::text || ':' || colocationid"
            " FROM pg_dist_partition"
        ).fetchall()
    )
    anchor = rows["workqueue_workitem"]
    assert anchor.startswith("h:")
    assert {t: rows.get(t) for t in TENANT_TABLES} == {t: anchor for t in TENANT_TABLES}
    assert all(rows.get(t, "").startswith("n:") for t in REFERENCE_TABLES)
    assert "workqueue_workers_worker" not in rows


def test_row_level_security_is_on_every_shard(product: dict[str, str]) -> None:
    fences = shard_fences("citus_owner")
    assert {t for t, _, _ in fences} >= {"workqueue_workitem", "workqueue_attempt"}
    assert [(t, bare) for t, _, bare in fences if bare] == []


def test_a_second_run_has_nothing_to_do_and_names_the_sites_tables(
    product: dict[str, str],
) -> None:
    out = io.StringIO()
    call_command("citus_distribute", "--dry-run", database="citus_owner", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "-- nothing to do: the queue's tables are laid out"
    assert "workqueue_demo_shipment" in lines[1]


def test_a_database_without_citus_is_refused(db: None) -> None:
    """The embedded single server: nothing read but the extension list, nothing changed."""
    with pytest.raises(CommandError, match="no citus extension"):
        call_command("citus_distribute", "--dry-run", database="default")
    with pytest.raises(CommandError, match="no citus extension"):
        call_command("citus_distribute", database="default")
