-- read_due_lanes: per lane, the pending items already due and how long the oldest has waited (seconds, by the database clock): what a lane with no live worker leaves waiting, read from the ready ring (a row per pending item)
SELECT w.lane, count(*) AS due,
       EXTRACT(EPOCH FROM now() - min(w.available_at))::float8 AS oldest_age_s
  FROM workqueue_ready w
 WHERE w.available_at <= now()
 GROUP BY w.lane
 ORDER BY w.lane
 LIMIT 200
