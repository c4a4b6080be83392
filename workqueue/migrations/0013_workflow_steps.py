"""A workflow's steps as declared (``workqueue_workflowstep``: each step's place and callback,
under row-level security like the items), filled for the steps declared before it; and the
items' workflow index, which covered live steps only, now covers every step that is not done,
by status (what a workflow's admin page counts and lists without reading its done steps). The
SQL is frozen as applied: a change is a new migration."""

from django.db import migrations, models

from tenancy.rls import apply_tenant_policy
from workqueue import SQL_DIR
from wqcore.sqlfiles import run_sql_file


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0012_workflows"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkflowStep",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "workflow_id",
                        "item_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("org_id", models.UUIDField()),
                ("workflow_id", models.UUIDField()),
                ("item_id", models.UUIDField()),
                ("place", models.IntegerField(blank=True, null=True)),
                (
                    "callback",
                    models.CharField(
                        blank=True,
                        choices=[("on_success", "On success"), ("on_complete", "On complete")],
                        max_length=12,
                        null=True,
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        condition=models.Q(("callback__isnull", False)),
                        fields=["workflow_id"],
                        name="workflowstep_callback_idx",
                    )
                ],
            },
        ),
        apply_tenant_policy("workqueue_workflowstep"),
        run_sql_file(SQL_DIR / "schema", "workflow_steps_v1"),
        migrations.RemoveIndex(model_name="workitem", name="workitem_workflow_idx"),
        migrations.AddIndex(
            model_name="workitem",
            index=models.Index(
                condition=models.Q(
                    (
                        "status__in",
                        ["waiting", "pending", "claimed", "failed", "discarded", "cancelled"],
                    ),
                    ("workflow_id__isnull", False),
                ),
                fields=["workflow_id", "status"],
                name="workitem_workflow_idx",
            ),
        ),
    ]
