-- start_rollup: the rollup's place, made on its first pass: nothing read yet, and a mark already settled (no attempt counted before the first pass is lost: it starts from the first id)
INSERT INTO workqueue_rollupstate (name, through_id, mark_id, mark_snapshot, marked_at, pending_minute)
VALUES ('attempts', 0, 0, pg_current_snapshot()::text, TIMESTAMPTZ 'epoch', NULL)
ON CONFLICT (name) DO NOTHING
