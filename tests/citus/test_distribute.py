"""The product's own tables on Citus, laid out by ``manage.py citus_distribute``."""

from __future__ import annotations

import io

import psycopg
import pytest
from django.core.management import CommandError, call_command

from workqueue.citus import COORDINATOR_TABLES, REFERENCE_TABLES, TENANT_TABLES, shard_fences


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


def test_every_table_of_the_queues_is_laid_out_somewhere(
    product: dict[str, str], coordinator: psycopg.Connection
) -> None:
    """A table a later migration adds is named in one of the three lists, or the layout would
    leave it on the coordinator by accident (as the kinds' minutes were, at first). The site's
    own tables (the reference site's demo) and Django's are the site's to place."""
    tables = {
        name
        for (name,) in coordinator.execute(
            "SELECT c.relname FROM pg_class c"
            " WHERE c.relnamespace = current_schema()::regnamespace"
            "   AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
            "   AND NOT EXISTS (SELECT FROM pg_inherits i WHERE i.inhrelid = c.oid)"
            "   AND c.relname LIKE 'workqueue%' AND c.relname NOT LIKE 'workqueue_demo%'"
        ).fetchall()
    }
    named = set(TENANT_TABLES + REFERENCE_TABLES + COORDINATOR_TABLES)
    assert sorted(tables - named) == []
    assert sorted(named - tables) == []
