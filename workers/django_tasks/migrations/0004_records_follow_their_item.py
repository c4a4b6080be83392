"""A task's record follows its work item into history (``workqueue`` migration 0022): the sweep
moves the two together and drops them together, so the foreign key whose cascade took the
record with its item (migration 0002) goes, since moving the item would have deleted the record.
A statement trigger on the item table does what the cascade did for the items deleted in the
hot table (the purge): it deletes their records, in the deleting statement."""

from django.db import migrations

FORWARD = """
-- records_follow: the record moves with its item into history and is dropped with it.
ALTER TABLE workqueue_tasks_taskrecord DROP CONSTRAINT workqueue_tasks_taskrecord_item_cascade;
INSERT INTO workqueue_history_follower (relname, item_column) VALUES ('workqueue_tasks_taskrecord', 'item_id');
-- records_gone_v1: the records of the items a statement deleted from the hot table (a move into history took its
-- records along before this runs, so it finds none of theirs).
CREATE FUNCTION workqueue_tasks_records_gone_v1() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT
    AS $$
BEGIN
    DELETE FROM ONLY workqueue_tasks_taskrecord t USING gone g WHERE t.item_id = g.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER workqueue_tasks_records_gone AFTER DELETE ON workqueue_workitem
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION workqueue_tasks_records_gone_v1();
"""

REVERSE = """
-- records_follow_reverse: undo records_follow (the records of items gone since are deleted first).
DROP TRIGGER workqueue_tasks_records_gone ON workqueue_workitem;
DROP FUNCTION workqueue_tasks_records_gone_v1();
DELETE FROM workqueue_history_follower WHERE relname = 'workqueue_tasks_taskrecord';
-- A foreign key sees the hot table only: the records of items in history go too.
DELETE FROM workqueue_tasks_taskrecord t WHERE NOT EXISTS (SELECT FROM ONLY workqueue_workitem w WHERE w.id = t.item_id);
ALTER TABLE workqueue_tasks_taskrecord
    ADD CONSTRAINT workqueue_tasks_taskrecord_item_cascade
    FOREIGN KEY (item_id) REFERENCES workqueue_workitem (id) ON DELETE CASCADE;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue_tasks", "0003_return_value_on_the_item"),
        ("workqueue", "0022_history"),
    ]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=REVERSE)]
