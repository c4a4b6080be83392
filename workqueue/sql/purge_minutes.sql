-- purge_minutes: delete up to `batch` of the gauges page's minutes older than `before` (oldest first, by the primary key's first column), and up to `batch` of their kinds' minutes; returns how many (the most of the two: a batch short in both is the last)
WITH doomed AS (
    SELECT m.minute, m.org_id, m.lane
      FROM workqueue_laneminute m
     WHERE m.minute < %(before)s::timestamptz
     ORDER BY m.minute
     LIMIT %(batch)s
), kinds_doomed AS (
    SELECT k.minute, k.org_id, k.lane, k.kind
      FROM workqueue_kindminute k
     WHERE k.minute < %(before)s::timestamptz
     ORDER BY k.minute
     LIMIT %(batch)s
), kinds_gone AS (
    DELETE FROM workqueue_kindminute AS k
     USING kinds_doomed d
     WHERE k.minute = d.minute AND k.org_id = d.org_id AND k.lane = d.lane AND k.kind = d.kind
    RETURNING 1
), gone AS (
    DELETE FROM workqueue_laneminute AS m
     USING doomed d
     WHERE m.minute = d.minute AND m.org_id = d.org_id AND m.lane = d.lane
    RETURNING 1
)
SELECT GREATEST((SELECT count(*) FROM gone), (SELECT count(*) FROM kinds_gone))
