-- count_dead: per tenant, how many of the newest `scan` dead letters a triage filter matches, and the database's now(): the moment a triage by filter is confirmed against (its fence)
WITH matched AS (
{dead_matching}
 ORDER BY w.updated_at DESC
 LIMIT %(scan)s
)
SELECT now() AS read_at,
       (SELECT COALESCE(json_agg(json_build_array(t.org_id, t.items)), '[]')
          FROM (SELECT m.org_id, count(*) AS items FROM matched m GROUP BY m.org_id) AS t)::text
