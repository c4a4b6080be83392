"""A task's return value is its work item's ``result`` (written by the statement that completes
the item): the record's own copy goes, once what it held is copied to the items, every
tenant's (the owner's policy lets the migrating login see them while its transaction names
``app.all_tenants``: tenancy/sql/tenant_policy.sql). Back again, the copy goes the other way."""

from django.db import migrations

# The tenant setting, for this transaction only, then the copy.
ALL_TENANTS = "SELECT set_config('app.all_tenants', 'on', true)"

FORWARD = """
-- return_value_to_result: each stored return value becomes its item's result, where it has none.
UPDATE workqueue_workitem AS w
   SET result = r.return_value
  FROM workqueue_tasks_taskrecord AS r
 WHERE r.item_id = w.id AND r.return_value IS NOT NULL AND w.result IS NULL
"""

REVERSE = """
-- result_to_return_value: undo return_value_to_result (a task item's result back on its record).
UPDATE workqueue_tasks_taskrecord AS r
   SET return_value = w.result
  FROM workqueue_workitem AS w
 WHERE w.id = r.item_id AND w.result IS NOT NULL
"""


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0006_results"),
        ("workqueue_tasks", "0002_row_level_security_and_cascade"),
    ]

    operations = [
        migrations.RunSQL([ALL_TENANTS, FORWARD], reverse_sql=[ALL_TENANTS, REVERSE]),
        migrations.RemoveField(model_name="taskrecord", name="return_value"),
    ]
