-- rotate_ready: turn the ready ring once (workqueue_rotate_ready_v2, sql/schema/ready_v2.sql: promote the later items within reach, ring the pending items without a ready row, empty the grown slots of neither this second nor the last, a backlog's once it holds more dead rows than live ones); returns whether this call had the turn and what it did
SELECT turn, promoted, adopted, emptied, moved, held
  FROM workqueue_rotate_ready_v2(%(min_bytes)s::bigint, %(max_rows)s::integer, %(batch)s::integer,
                                 %(lock_timeout_ms)s::integer)
