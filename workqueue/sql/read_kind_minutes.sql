-- read_kind_minutes: the last `bins` spans of `bin_s` seconds (spanned as read_minutes spans them), per lane and kind: the longest any sampled minute of the span found its oldest due pending item waiting (the most over tenants), and the attempts' run-time histogram summed bucket by bucket; in every tenant the login sees; one row with no lane when nothing was rolled up
-- {run_sums} sums each bucket of the histograms in `runs` (one sum per bucket, written out: no unnest of every row).
WITH span AS (
    SELECT last - make_interval(secs => %(bin_s)s::float8 * (%(bins)s::integer - 1)) AS first, last
      FROM (SELECT date_bin(make_interval(secs => %(bin_s)s::float8), now(), TIMESTAMPTZ 'epoch') AS last) AS l
), per_span AS (
    SELECT date_bin(make_interval(secs => %(bin_s)s::float8), k.minute, TIMESTAMPTZ 'epoch') AS bin,
           k.lane, k.kind, max(k.oldest_wait_s) AS oldest_wait_s, {run_sums} AS runs
      FROM workqueue_kindminute k, span s
     WHERE k.minute >= s.first
     GROUP BY 1, k.lane, k.kind
)
SELECT s.first, p.bin, p.lane, p.kind, p.oldest_wait_s, p.runs
  FROM span s
  LEFT JOIN per_span p ON true
 ORDER BY p.bin, p.lane, p.kind
