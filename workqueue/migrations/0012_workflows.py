"""Workflows: the ``waiting`` status (an item waiting for its parents, which no claim sees), the
item's workflow, its count of unmet edges and whether it is a parent, the edges table
(``workqueue_dependency``, one row per (parent, child), under row-level security like the
items), and the function every statement that ends or requeues an item calls to move the
items waiting for it (``sql/schema/move_dependents_v1.sql``). The SQL is frozen as applied: a change is a new migration
(and a new version of the function)."""

from django.db import migrations, models

from tenancy.rls import apply_tenant_policy
from workqueue import SQL_DIR
from wqcore.actor import SYSTEM_ACTOR
from wqcore.sqlfiles import run_sql_file
from wqcore.statements import sql_literal


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0011_ratebucket_free_at"),
    ]

    operations = [
        migrations.CreateModel(
            name="Dependency",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "parent_id",
                        "child_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("org_id", models.UUIDField()),
                ("parent_id", models.UUIDField()),
                ("child_id", models.UUIDField()),
                (
                    "needs",
                    models.CharField(
                        choices=[("done", "Done"), ("finished", "Finished")],
                        default="done",
                        max_length=10,
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["child_id", "parent_id"], name="dependency_child_idx")
                ],
            },
        ),
        migrations.AddField(
            model_name="workitem",
            name="has_dependents",
            field=models.BooleanField(db_default=False),
        ),
        migrations.AddField(
            model_name="workitem",
            name="waiting_on",
            field=models.IntegerField(db_default=0),
        ),
        migrations.AddField(
            model_name="workitem",
            name="workflow_id",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="workitem",
            name="status",
            field=models.CharField(
                choices=[
                    ("waiting", "Waiting"),
                    ("pending", "Pending"),
                    ("claimed", "Claimed"),
                    ("done", "Done"),
                    ("failed", "Failed"),
                    ("discarded", "Discarded"),
                    ("cancelled", "Cancelled"),
                ],
                default="pending",
                max_length=10,
            ),
        ),
        migrations.AddIndex(
            model_name="workitem",
            index=models.Index(
                condition=models.Q(
                    ("status__in", ["waiting", "pending", "claimed"]),
                    ("workflow_id__isnull", False),
                ),
                fields=["workflow_id"],
                name="workitem_workflow_idx",
            ),
        ),
        migrations.AddConstraint(
            model_name="workitem",
            constraint=models.CheckConstraint(
                condition=models.Q(("waiting_on__gte", 0)),
                name="workitem_waiting_on_not_negative",
            ),
        ),
        apply_tenant_policy("workqueue_dependency"),
        run_sql_file(
            SQL_DIR / "schema", "move_dependents_v1", system_actor=sql_literal(SYSTEM_ACTOR)
        ),
    ]
