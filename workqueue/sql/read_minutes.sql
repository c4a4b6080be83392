-- read_minutes: the last `bins` spans of `bin_s` seconds (the current one last, by the database clock; spans start on whole multiples of bin_s since the epoch), per lane: attempts done, failed and dead-lettered, the waits' histogram summed (an object: bucket -> claims, empty buckets left out), and the depth (pending items summed over tenants, the most of any minute in the span); in every tenant the login sees; one row with no lane when nothing was rolled up
WITH span AS (
    SELECT last - make_interval(secs => %(bin_s)s::float8 * (%(bins)s::integer - 1)) AS first, last
      FROM (SELECT date_bin(make_interval(secs => %(bin_s)s::float8), now(), TIMESTAMPTZ 'epoch') AS last) AS l
), rows AS (
    SELECT date_bin(make_interval(secs => %(bin_s)s::float8), m.minute, TIMESTAMPTZ 'epoch') AS bin,
           m.minute, m.lane, m.done, m.failed, m.dead, m.pending, m.waits
      FROM workqueue_laneminute m, span s
     WHERE m.minute >= s.first
), counts AS (
    SELECT r.bin, r.lane, sum(r.done) AS done, sum(r.failed) AS failed, sum(r.dead) AS dead
      FROM rows r
     GROUP BY r.bin, r.lane
), depth AS (
    SELECT d.bin, d.lane, max(d.pending) AS pending
      FROM (SELECT r.bin, r.minute, r.lane, sum(r.pending) AS pending
              FROM rows r GROUP BY r.bin, r.minute, r.lane) AS d
     GROUP BY d.bin, d.lane
), waits AS (
    SELECT w.bin, w.lane, jsonb_object_agg(w.k, w.n) AS waits
      FROM (SELECT r.bin, r.lane, u.k - 1 AS k, sum(u.n) AS n
              FROM rows r, unnest(r.waits) WITH ORDINALITY AS u(n, k)
             WHERE u.n > 0
             GROUP BY r.bin, r.lane, u.k) AS w
     GROUP BY w.bin, w.lane
)
SELECT s.first, s.last, c.bin, c.lane, c.done, c.failed, c.dead, d.pending, w.waits
  FROM span s
  LEFT JOIN counts c ON true
  LEFT JOIN depth d ON d.bin = c.bin AND d.lane = c.lane
  LEFT JOIN waits w ON w.bin = c.bin AND w.lane = c.lane
 ORDER BY c.bin, c.lane
