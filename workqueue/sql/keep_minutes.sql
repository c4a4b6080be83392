-- keep_minutes: drop the days of the gauges page's minutes (each day's partition of the lanes' minutes and of the kinds') whose whole day ended more than `retention_s` seconds ago (each unless another session holds a lock on it), then make those from the retention's edge to `ahead_s` seconds ahead, by the database's clock (sql/schema/minutes_parts_v1.sql, minutes_kinds_v1.sql); returns how many days it made, dropped and left for a later pass
SELECT workqueue_minutes_keep_v2(now() - make_interval(secs => %(retention_s)s::float8),
                                 now() + make_interval(secs => %(ahead_s)s::float8)) AS made,
       d.dropped, d.waiting
  FROM workqueue_minutes_drop_v2(now() - make_interval(secs => %(retention_s)s::float8)) AS d
