-- read_rollup_place: when the rollup last reached its mark (the attempts before it are in the gauges page's minutes; NULL before its first pass), and the database's now
SELECT (SELECT s.marked_at FROM workqueue_rollupstate s WHERE s.name = 'attempts'), now()
