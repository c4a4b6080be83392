-- read_minutes: the last `bins` spans of `bin_s` seconds (the current one last, by the database clock; spans start on whole multiples of bin_s since the epoch), per lane: attempts done, failed and dead-lettered, the waits' histogram summed bucket by bucket, and the depth (pending items summed over tenants, the most of any minute in the span); in every tenant the login sees; one row with no lane when nothing was rolled up
-- {wait_sums} sums each bucket of the histograms in `waits` (one sum per bucket, written out: no unnest of every row).
WITH span AS (
    SELECT last - make_interval(secs => %(bin_s)s::float8 * (%(bins)s::integer - 1)) AS first, last
      FROM (SELECT date_bin(make_interval(secs => %(bin_s)s::float8), now(), TIMESTAMPTZ 'epoch') AS last) AS l
), per_minute AS (
    SELECT date_bin(make_interval(secs => %(bin_s)s::float8), m.minute, TIMESTAMPTZ 'epoch') AS bin,
           m.lane, sum(m.done) AS done, sum(m.failed) AS failed, sum(m.dead) AS dead,
           sum(m.pending) AS pending, {wait_sums} AS waits
      FROM workqueue_laneminute m, span s
     WHERE m.minute >= s.first
     GROUP BY m.minute, m.lane
), per_span AS (
    SELECT pm.bin, pm.lane, sum(pm.done)::bigint AS done, sum(pm.failed)::bigint AS failed,
           sum(pm.dead)::bigint AS dead, max(pm.pending)::bigint AS pending, {wait_sums} AS waits
      FROM per_minute pm
     GROUP BY pm.bin, pm.lane
)
SELECT s.first, p.bin, p.lane, p.done, p.failed, p.dead, p.pending, p.waits
  FROM span s
  LEFT JOIN per_span p ON true
 ORDER BY p.bin, p.lane
