-- queue_gauges: everything a scrape of /metrics shows about the queue, in one statement across tenants: the items by lane, kind and status (workqueue/sql/read_gauges.sql), the ten deepest tenants per lane (workqueue/sql/read_top_tenants.sql), the outbox lag (outbox/sql/read_lag.sql) the live workers (workers/sql/read_workers.sql), the schedules (workers/sql/read_schedule_gauges.sql), the lanes live workers serve (workers/sql/read_live_lanes.sql) and the kinds of each (workers/sql/read_live_kinds.sql), the paused lanes and kinds (workqueue/sql/read_pauses.sql) the rate limits with what each has spent now (workqueue/sql/read_rate_limits.sql) and history's spans as the statistics count them (workqueue/sql/read_history.sql)
WITH item_groups AS (
{read_gauges}
), top_tenants AS (
{read_top_tenants}
), outbox_lag AS (
{read_lag}
), live_workers AS (
{read_workers}
), schedules AS (
{read_schedule_gauges}
), live_lanes AS (
{read_live_lanes}
), live_kinds AS (
{read_live_kinds}
), pauses AS (
{read_pauses}
), rate_limits AS (
{read_rate_limits}
), history AS (
{read_history}
)
SELECT (SELECT COALESCE(json_agg(g), '[]') FROM item_groups AS g)::text,
       (SELECT COALESCE(json_agg(t), '[]') FROM top_tenants AS t)::text,
       (SELECT row_to_json(o) FROM outbox_lag AS o)::text,
       (SELECT COALESCE(json_agg(w), '[]') FROM live_workers AS w)::text,
       (SELECT COALESCE(json_agg(s), '[]') FROM schedules AS s)::text,
       (SELECT COALESCE(json_agg(l.lane), '[]') FROM live_lanes AS l)::text,
       (SELECT COALESCE(json_agg(json_build_array(k.lane, k.kind)), '[]') FROM live_kinds AS k)::text,
       (SELECT COALESCE(json_agg(json_build_object('lane', p.lane, 'kind', p.kind)), '[]')
          FROM pauses AS p)::text,
       (SELECT COALESCE(json_agg(json_build_object('id', r.id, 'scope', r.scope, 'target', r.target,
                                                   'used', r.used, 'blocked', r.blocked)), '[]')
          FROM rate_limits AS r)::text,
       (SELECT json_build_object('spans', count(*), 'items', COALESCE(sum(h.items), 0),
                                 'bytes', COALESCE(sum(h.bytes), 0))
          FROM history AS h)::text
