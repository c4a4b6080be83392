"""The ready ring (``sql/schema/ready_v1.sql``, ``workqueue/models/ready.py``): the claim reads
the pending items from a table whose partitions the rotation empties with TRUNCATE, instead of
the items' partial indexes, whose dead entries a held snapshot keeps for every claim to walk.

Made without a long lock on the items, with workers of the release before running: the new
column is empty (instant), the index on items without a ready row is built concurrently, and
the pending items already there (and those the release before still writes) are given their
ready rows by the rotation, in batches. The claim's old indexes on the items go last
(concurrently): a worker of the release before still claims without them, by a scan, until it
is replaced. Version 3 of the function that moves a parent's waiting children gives those it
makes pending their ready rows; version 2 stays for the workers of the release before."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models

from tenancy.rls import apply_tenant_policy
from workqueue import SQL_DIR
from wqcore.actor import SYSTEM_ACTOR
from wqcore.sqlfiles import run_sql_file
from wqcore.statements import sql_literal


class Migration(migrations.Migration):
    # CREATE and DROP INDEX CONCURRENTLY cannot run in a transaction; each step is its own.
    atomic = False

    dependencies = [
        ("workqueue", "0019_rate_grant_v2"),
    ]

    operations = [
        migrations.AddField(
            model_name="workitem",
            name="ringed_at",
            field=models.DateTimeField(editable=False, null=True),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                run_sql_file(SQL_DIR / "schema", "ready_v1"),
                apply_tenant_policy("workqueue_ready"),
            ],
            state_operations=[
                migrations.CreateModel(
                    name="Ready",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "id",
                                "slot",
                                blank=True,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("slot", models.SmallIntegerField()),
                        ("id", models.UUIDField()),
                        ("org_id", models.UUIDField()),
                        ("lane", models.CharField(max_length=50)),
                        ("kind", models.CharField(max_length=100)),
                        ("priority", models.SmallIntegerField()),
                        ("available_at", models.DateTimeField()),
                        ("concurrency_key", models.CharField(max_length=200, null=True)),
                        ("rate_key", models.CharField(max_length=200, null=True)),
                    ],
                    options={"db_table": "workqueue_ready"},
                ),
            ],
        ),
        run_sql_file(
            SQL_DIR / "schema", "move_dependents_v3", system_actor=sql_literal(SYSTEM_ACTOR)
        ),
        AddIndexConcurrently(
            model_name="workitem",
            index=models.Index(
                condition=models.Q(
                    ("status", "pending"),
                    models.Q(("ringed_at", models.F("updated_at")), _negated=True),
                ),
                fields=["id"],
                name="workitem_unringed_idx",
            ),
        ),
        RemoveIndexConcurrently(model_name="workitem", name="workitem_fair_claim_idx"),
        RemoveIndexConcurrently(model_name="workitem", name="workitem_claim_idx"),
        RemoveIndexConcurrently(model_name="workitem", name="workitem_key_waiting_idx"),
    ]
