-- keep_history: make the history children that cover the spans from `from_s` seconds ago to `ahead_s` seconds ahead, by the database's clock, each `width_s` seconds wide (workqueue_history_keep_v1, sql/schema/history_v1.sql); returns how many it made
SELECT workqueue_history_keep_v1(now() - make_interval(secs => %(from_s)s::float8),
                                 now() + make_interval(secs => %(ahead_s)s::float8),
                                 %(width_s)s::float8)
