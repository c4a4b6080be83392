"""The queue's tables laid out on a Citus cluster: ``manage.py citus_distribute``.

Run once after ``migrate`` on a Citus coordinator, as the tables' owner, and again after each
``migrate`` (it does only what is not done yet). Every tenant table is distributed by
``org_id`` and colocated with the work item, so one tenant's rows of every table sit on one
node and a tenant's transaction stays there; the small shared tables become reference tables
(a copy on every node, so a tenant's statement can join them where it runs); the fleet's own
tables (workers, schedules, mutexes, rescue turns, the rollup's and history's bookkeeping, rate
buckets) stay on the coordinator. A single server never runs any of it: nothing here is
imported by the queue's statements, and the schema the migrations make is unchanged.

Citus wants every unique key and primary key of a distributed table to hold the distribution
column, so each such key without ``org_id`` gets it in front (the work item's key becomes
``(org_id, id)``; Django's model keeps ``id`` as its pk, which is still unique in practice: a
minted UUID). Two statement triggers cannot run on shards (their bodies read another
distributed table); each is replaced by a composite foreign key between colocated tables,
which Citus keeps on each node (``REPLACING``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.db import connections
from psycopg import sql

from tenancy.grants import apply_grants
from wqcore.conf import owner_alias

SQL_DIR = Path(__file__).parent / "sql" / "citus"
COLUMN = "org_id"
# The table every other tenant table is colocated with (a site colocates its own with it too).
ANCHOR = "workqueue_workitem"
TENANT_TABLES = (
    ANCHOR,
    "workqueue_attempt",
    "workqueue_dependency",
    "workqueue_workflowstep",
    "workqueue_ready",
    "workqueue_storedresponse",
    "workqueue_outbox_outboxrow",
    "workqueue_audit_auditentry",
    "workqueue_laneminute",
    "workqueue_kindminute",
    "workqueue_tasks_taskrecord",
)
# Read by every tenant's statements, written rarely: a copy on every node.
REFERENCE_TABLES = (
    "workqueue_tenancy_org",
    "workqueue_tenancy_membership",
    "workqueue_tenantshare",
    "workqueue_pause",
    "workqueue_ratelimit",
)
# The fleet's own tables, left on the coordinator (said here so the command can name them).
COORDINATOR_TABLES = (
    "workqueue_workers_worker",
    "workqueue_workers_schedulestate",
    "workqueue_workers_rescueturn",
    "workqueue_mutex",
    "workqueue_rollupstate",
    "workqueue_ratebucket",
    "workqueue_history_span",
    "workqueue_history_follower",
    "workqueue_history_timed",
    "workqueue_minutes_part",
)


@dataclass(frozen=True)
class Replacing:
    """A trigger Citus cannot run on a shard, and the foreign key that keeps its rule there."""

    table: str
    trigger: str
    key: str
    definition: str


REPLACING = (
    # An edge joins two items of its own tenant; purge_items deletes an item's edges with it.
    Replacing(
        "workqueue_dependency",
        "workqueue_edge_tenant",
        "workqueue_dependency_parent_fk",
        "FOREIGN KEY (org_id, parent_id) REFERENCES workqueue_workitem (org_id, id)"
        " ON DELETE CASCADE",
    ),
    Replacing(
        "workqueue_dependency",
        "workqueue_edge_tenant",
        "workqueue_dependency_child_fk",
        "FOREIGN KEY (org_id, child_id) REFERENCES workqueue_workitem (org_id, id)"
        " ON DELETE CASCADE",
    ),
    # A task record goes with its item.
    Replacing(
        "workqueue_workitem",
        "workqueue_tasks_records_gone",
        "workqueue_tasks_taskrecord_item_fk",
        "FOREIGN KEY (org_id, item_id) REFERENCES workqueue_workitem (org_id, id)"
        " ON DELETE CASCADE",
    ),
)
# The foreign key's table, for each replacing key (the trigger may sit on the other side).
KEY_TABLE = {
    "workqueue_dependency_parent_fk": "workqueue_dependency",
    "workqueue_dependency_child_fk": "workqueue_dependency",
    "workqueue_tasks_taskrecord_item_fk": "workqueue_tasks_taskrecord",
}


class NotCitus(Exception):
    """The database cannot take the layout (not Citus, or not in a state to); says why."""


def _rows(alias: str, name: str, *params: list[str] | str) -> list[tuple[object, ...]]:
    with connections[alias].cursor() as cursor:
        cursor.execute((SQL_DIR / f"{name}.sql").read_text(), params or None)
        return list(cursor.fetchall())


def _ident(name: str) -> sql.Identifier:
    return sql.Identifier(name)


def plan(alias: str | None = None) -> list[str]:
    """The statements that lay the queue's tables out on this Citus database, skipping what is
    done already; raises NotCitus where it cannot."""
    alias = alias or owner_alias()
    refuse(alias)
    placed = {str(name): str(method) for name, method in _rows(alias, "placed")}
    tables = set(TENANT_TABLES + REFERENCE_TABLES)
    present = {str(name) for (name,) in _rows(alias, "present", list(tables))}
    missing = sorted(tables - present)
    if missing:
        raise NotCitus(f"run manage.py migrate first: no table {', '.join(missing)}")
    out: list[str] = []
    with connections[alias].cursor() as cursor:
        conn = cursor.connection

        def text(query: sql.Composable) -> str:
            return query.as_string(conn)

        # Any foreign key touching a table about to be distributed, except reference to
        # reference (Citus keeps those), is dropped first.
        todo = [t for t in TENANT_TABLES + REFERENCE_TABLES if t not in placed]
        kept_keys = {r.key for r in REPLACING}
        for table, key, target in _rows(alias, "foreign_keys", todo, todo):
            both_reference = table in REFERENCE_TABLES and target in REFERENCE_TABLES
            if key in kept_keys or both_reference:
                continue
            out.append(
                text(
                    sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(
                        _ident(str(table)), _ident(str(key))
                    )
                )
            )
        for table, trigger in dict.fromkeys((r.table, r.trigger) for r in REPLACING):
            if table not in placed:
                out.append(
                    text(
                        sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(
                            _ident(trigger), _ident(table)
                        )
                    )
                )
        for table in TENANT_TABLES:
            if table in placed:
                continue
            for key, kind, columns in _rows(alias, "keys", table):
                assert isinstance(columns, list)
                if COLUMN in columns:
                    continue
                add = "PRIMARY KEY" if kind == "p" else "UNIQUE"
                out.append(
                    text(
                        sql.SQL(
                            "ALTER TABLE {} DROP CONSTRAINT {}, ADD CONSTRAINT {} {} ({})"
                        ).format(
                            _ident(table),
                            _ident(str(key)),
                            _ident(str(key)),
                            sql.SQL(add),
                            sql.SQL(", ").join(_ident(c) for c in [COLUMN, *columns]),
                        )
                    )
                )
            colocate = "none" if table == ANCHOR else ANCHOR
            out.append(
                text(
                    sql.SQL("SELECT create_distributed_table({}, {}, colocate_with => {})").format(
                        sql.Literal(table), sql.Literal(COLUMN), sql.Literal(colocate)
                    )
                )
            )
        for table in REFERENCE_TABLES:
            if table not in placed:
                out.append(
                    text(sql.SQL("SELECT create_reference_table({})").format(sql.Literal(table)))
                )
        have = {str(key) for (key,) in _rows(alias, "named_keys", list(KEY_TABLE))}
        for replacing in REPLACING:
            if replacing.key not in have:
                out.append(
                    text(
                        sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
                            _ident(KEY_TABLE[replacing.key]),
                            _ident(replacing.key),
                            sql.SQL(replacing.definition),
                        )
                    )
                )
    return out


def refuse(alias: str) -> None:
    """Raise NotCitus unless this database has Citus and the item table has no history."""
    ((citus, children),) = _rows(alias, "can_distribute")
    if not citus:
        raise NotCitus(
            "this database has no citus extension: citus_distribute is for a Citus "
            "coordinator (a single server needs none of it)"
        )
    if children:
        raise NotCitus(
            f"the item table has {children} history span tables (inheritance children), which "
            "Citus cannot distribute: set WORKQUEUE['HISTORY'] = False, let the sweep's "
            "keep_history drop them (or drop them), then run this again"
        )


def distribute(alias: str | None = None) -> list[str]:
    """Run ``plan()``'s statements one by one (Citus sends a DDL's whole string on to the
    workers, so never batched), then grant the logins again so every shard has the rights;
    returns what ran. Safe to run again: a second run finds nothing to do."""
    alias = alias or owner_alias()
    statements = plan(alias)
    with connections[alias].cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    apply_grants()
    return statements


def site_tables(alias: str | None = None) -> list[str]:
    """The tables with an ``org_id`` that are not the queue's: the site's own, which it
    distributes itself, colocated with ``ANCHOR`` (docs/howto/citus.md)."""
    ours = set(TENANT_TABLES + REFERENCE_TABLES)
    return [str(t) for (t,) in _rows(alias or owner_alias(), "org_tables") if t not in ours]


def shard_fences(alias: str | None = None) -> list[tuple[str, int, int]]:
    """Each distributed or reference table of the queue's, with the number of its shard
    placements, and how many of those lack row-level security (ENABLE, FORCE, and both
    policies): 0 everywhere once the layout is done."""
    alias = alias or owner_alias()
    return [(str(t), int(str(n)), int(str(b))) for t, n, b in _rows(alias, "shard_fences")]
