-- group_dead: the newest `scan` dead letters a triage filter matches, grouped by kind and the first line of the error (how many, first and last failed, most first), with how many were read (equal to scan: there may be more)
WITH matched AS (
{dead_matching}
 ORDER BY w.updated_at DESC
 LIMIT %(scan)s
)
SELECT m.kind, split_part(btrim(m.last_error), E'\n', 1) AS error, count(*) AS items,
       min(m.updated_at) AS first_failed, max(m.updated_at) AS last_failed,
       (SELECT count(*) FROM matched) AS scanned
  FROM matched m
 GROUP BY 1, 2
 ORDER BY 3 DESC, 5 DESC
 LIMIT %(groups)s
