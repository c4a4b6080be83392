"""The product's own tables on Citus, laid out by ``manage.py citus_distribute``."""

from __future__ import annotations

import psycopg

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
