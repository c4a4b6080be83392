-- drop_history: drop the history children of each timed table whose whole span ended more than its own retention ago (`tables`, `retentions_s`), then the spans that ended more than `retention_s` seconds ago with every child left, each unless another session holds a lock on it (workqueue_history_drop_v2); returns how many it dropped and how many it left for a later pass
SELECT dropped, waiting
  FROM workqueue_history_drop_v2(now() - make_interval(secs => %(retention_s)s::float8),
                                 %(tables)s::name[],
                                 ARRAY(SELECT now() - make_interval(secs => r.s)
                                         FROM unnest(%(retentions_s)s::float8[]) WITH ORDINALITY AS r(s, n)
                                        ORDER BY r.n))
