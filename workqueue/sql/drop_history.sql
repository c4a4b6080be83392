-- drop_history: drop the history children whose whole span ended more than `retention_s` seconds ago, each unless another session holds a lock on it (workqueue_history_drop_v1); returns how many it dropped and how many it left for a later pass
SELECT dropped, waiting
  FROM workqueue_history_drop_v1(now() - make_interval(secs => %(retention_s)s::float8))
