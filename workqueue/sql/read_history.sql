-- read_history: each history span, oldest first, with its items and the bytes of its tables as the statistics last counted them (reltuples: nothing is scanned)
SELECT s.stamp, s.lo, s.hi,
       COALESCE((SELECT GREATEST(c.reltuples, 0)::bigint FROM pg_class c
                  WHERE c.oid = to_regclass('workqueue_workitem_done_' || s.stamp)), 0) AS items,
       COALESCE((SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c
                  WHERE c.relname IN (SELECT 'workqueue_workitem_done_' || s.stamp
                                      UNION ALL
                                      SELECT f.relname || '_done_' || s.stamp FROM workqueue_history_follower f)), 0) AS bytes
  FROM workqueue_history_span s
 ORDER BY s.lo
