-- history_timed_v1_reverse: undo history_timed_v1, after putting every row the timed tables' children hold back into their tables (the migration's first step, unapplied last, gives the share function back its v2 body).
SELECT workqueue_history_untime_v1(t.relname) FROM workqueue_history_timed t;
DROP FUNCTION workqueue_history_untime_v1(name);
DROP FUNCTION workqueue_history_drop_v2(timestamptz, name[], timestamptz[]);
DROP FUNCTION workqueue_history_move_timed_v1(name, timestamptz, timestamptz, integer);
DROP FUNCTION workqueue_history_keep_v1(timestamptz, timestamptz, float8);
ALTER FUNCTION workqueue_history_keep_spans_v1(timestamptz, timestamptz, float8) RENAME TO workqueue_history_keep_v1;
DROP FUNCTION workqueue_history_timed_kids_v1();
DROP TABLE workqueue_history_timed;
