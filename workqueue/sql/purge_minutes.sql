-- purge_minutes: delete up to `batch` of the gauges page's minutes older than `before` (oldest first, by the primary key's first column); returns how many
WITH doomed AS (
    SELECT m.minute, m.org_id, m.lane
      FROM workqueue_laneminute m
     WHERE m.minute < %(before)s::timestamptz
     ORDER BY m.minute
     LIMIT %(batch)s
), gone AS (
    DELETE FROM workqueue_laneminute AS m
     USING doomed d
     WHERE m.minute = d.minute AND m.org_id = d.org_id AND m.lane = d.lane
    RETURNING 1
)
SELECT count(*) FROM gone
