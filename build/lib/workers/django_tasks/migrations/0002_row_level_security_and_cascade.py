"""Row-level security on task records (tenancy/sql/tenant_policy.sql), and the foreign key
that deletes a record with its work item.

The queue's purge deletes finished items in bulk with raw SQL, so the record must go in the
database, not in Django's collector; Django 6.0 has no database-level ``on_delete`` (it comes
in 6.1 as ``DB_CASCADE``), so the constraint is made here, frozen as applied. The referential
action runs as the table's owner and bypasses row-level security, as PostgreSQL's foreign
keys always do."""

from django.db import migrations

from tenancy.rls import apply_tenant_policy

FORWARD = """
-- item_cascade: a task's record goes with its work item (the purge, a discard), in the database.
ALTER TABLE workqueue_tasks_taskrecord
    ADD CONSTRAINT workqueue_tasks_taskrecord_item_cascade
    FOREIGN KEY (item_id) REFERENCES workqueue_workitem (id) ON DELETE CASCADE
"""

REVERSE = """
-- item_cascade_reverse: undo item_cascade.
ALTER TABLE workqueue_tasks_taskrecord DROP CONSTRAINT workqueue_tasks_taskrecord_item_cascade
"""


class Migration(migrations.Migration):
    dependencies = [("workqueue_tasks", "0001_initial")]

    operations = [
        apply_tenant_policy("workqueue_tasks_taskrecord"),
        migrations.RunSQL(FORWARD, reverse_sql=REVERSE),
    ]
