-- read_top_tenants: per lane, the ten tenants with the most pending items (bounded: never one row per tenant, and every undeclared lane counted as one), with the age in seconds of each one's oldest due item, read from the ready ring (a row per pending item)
SELECT lane, org_id, items, oldest_age_s, rank
  FROM (SELECT lane, org_id, count(*) AS items,
               EXTRACT(EPOCH FROM now() - min(available_at) FILTER (WHERE available_at <= now()))::float8 AS oldest_age_s,
               row_number() OVER (PARTITION BY lane ORDER BY count(*) DESC, org_id) AS rank
          FROM (SELECT CASE WHEN lane = ANY(%(lanes)s::text[]) THEN lane ELSE '(undeclared)' END AS lane,
                       org_id, available_at
                  FROM workqueue_ready) AS pending
         GROUP BY lane, org_id) AS ranked
 WHERE rank <= 10
