-- move_history: move up to `batch` done items (none of a workflow) that ended at or after `since` and more than `after_s` seconds ago, the oldest first, from the hot table into their history child, in one statement (workqueue_history_move_v1); returns how many moved (-1: no child holds the oldest) and the newest updated_at it moved, where the next batch starts
SELECT moved, through
  FROM workqueue_history_move_v1(%(since)s::timestamptz,
                                 now() - make_interval(secs => %(after_s)s::float8),
                                 %(batch)s::integer)
