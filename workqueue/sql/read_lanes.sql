-- read_lanes: the lanes that hold items, for the admin's lane filter, without reading the whole table: the lanes of pending items by a loose index scan of the ready ring (one probe of each slot's workqueue_ready_claim_idx per lane), of claimed items (workitem_stale_idx) when with_live, and of the newest `scan` dead letters (workitem_triage_idx); at most 200
WITH RECURSIVE pending AS (
    (SELECT r.lane, 1 AS n FROM workqueue_ready r
      WHERE %(with_live)s::boolean ORDER BY r.lane LIMIT 1)
    UNION ALL
    SELECT (SELECT r.lane FROM workqueue_ready r
             WHERE r.lane > p.lane ORDER BY r.lane LIMIT 1), p.n + 1
      FROM pending p
     WHERE p.lane IS NOT NULL AND p.n < 200
), dead AS (
    SELECT w.lane FROM workqueue_workitem w
     WHERE w.status = 'failed' ORDER BY w.updated_at DESC LIMIT %(scan)s
)
SELECT l.lane FROM (
    SELECT lane FROM pending
    UNION SELECT w.lane FROM workqueue_workitem w WHERE w.status = 'claimed' AND %(with_live)s::boolean
    UNION SELECT lane FROM dead
) AS l
 WHERE l.lane IS NOT NULL
 ORDER BY l.lane
 LIMIT 200
