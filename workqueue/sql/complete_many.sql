-- complete_many: mark done each (org, id, token) still held under that token, across tenants, with its result (JSON text at the same place in `results`; the array NULL when no item has one), and record each one's attempt (its worker, start and end) and meet its edges (the items waiting for it) in the same statement; returns the fences completed (org, id, the token that held it)
-- Each row is found by its key and checked against its own places in the three arrays (array_positions: an id given
-- twice matches either token), not joined to them: the planner cannot know the arrays' length and, believing few rows
-- claimed, nested a scan of the arrays inside the scan of the claimed rows (100 x 100 pairs for a batch of 100).
-- The status is checked inside that test, not beside the id: there the planner would read the partial index on claimed
-- rows (workitem_stale_idx) from end to end, filtering by id, and every batch would cost as many rows as are claimed.
WITH done AS (
UPDATE ONLY workqueue_workitem AS w
   SET status = 'done', lease_expires_at = NULL, last_error = '', updated_at = now(),
       updated_by = {system_actor},
       -- The result at the place of the fence that holds it (an id given twice: the one whose token matches);
       -- a batch without results skips the search.
       result = CASE WHEN %(results)s::text[] IS NULL THEN NULL ELSE
                (SELECT (%(results)s::text[])[p.i]::jsonb
                   FROM unnest(array_positions(%(ids)s::uuid[], w.id)) AS p(i)
                  WHERE (%(tokens)s::uuid[])[p.i] = w.claim_token LIMIT 1) END
 WHERE w.id = ANY(%(ids)s::uuid[])
   AND EXISTS (SELECT FROM unnest(array_positions(%(ids)s::uuid[], w.id)) AS p(i)
                WHERE (%(org_ids)s::uuid[])[p.i] = w.org_id AND (%(tokens)s::uuid[])[p.i] = w.claim_token
                  AND w.status = 'claimed')
RETURNING w.id, w.org_id, w.claim_token, w.attempts, w.claimed_by, w.claimed_at, w.has_dependents
), ended AS (
    SELECT d.org_id, d.id, d.attempts, d.claimed_by, d.claimed_at,
           'done' AS outcome, '' AS error, '' AS traceback
      FROM done d
), attempts AS (
{record_attempts}
), parent_items AS (
    SELECT d.id, d.has_dependents FROM done d
), {move_dependents}
SELECT d.org_id, d.id, d.claim_token FROM done d, (SELECT count(*) FROM dependents) AS r
