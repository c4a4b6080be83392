-- ready_v1_reverse: drop the ready ring, its functions and its mutex row.
DROP FUNCTION workqueue_rotate_ready_v1(bigint, integer, integer, integer);
DROP FUNCTION workqueue_ready_forget(uuid[]);
DROP FUNCTION workqueue_ready_slot(timestamptz);
DROP FUNCTION workqueue_ready_reach();
DROP TABLE workqueue_ready;
DELETE FROM workqueue_mutex WHERE name = 'workqueue.ready';
