-- move_timed_history: move up to `batch` finished rows of the timed table `table` whose time is at or after `since` and more than `after_s` seconds ago, the oldest first, into their history child, in one statement (workqueue_history_move_timed_v1); returns how many moved (-1: no child holds the oldest) and the newest time it moved, where the next batch starts
SELECT moved, through
  FROM workqueue_history_move_timed_v1(%(table)s::name, %(since)s::timestamptz,
                                       now() - make_interval(secs => %(after_s)s::float8),
                                       %(batch)s::integer)
