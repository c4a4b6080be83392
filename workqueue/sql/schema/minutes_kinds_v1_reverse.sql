-- minutes_kinds_v1_reverse: undo minutes_kinds_v1 (the kinds' minutes go with their table).
DROP FUNCTION workqueue_minutes_drop_v2(timestamptz);
DROP FUNCTION workqueue_minutes_keep_v2(timestamptz, timestamptz);
DROP FUNCTION workqueue_minutes_kinds_v1();
DROP TABLE workqueue_kindminute;
