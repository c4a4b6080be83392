-- complete_many_release_all: (bench only) complete_many as shipped, but calling the function that moves dependents for every item it completes, as it would without the parent flag (has_dependents): what the flag spares a plain item
WITH done AS (
UPDATE workqueue_workitem AS w
   SET status = 'done', lease_expires_at = NULL, last_error = '', updated_at = now(),
       updated_by = {system_actor}
 WHERE w.id = ANY(%(ids)s::uuid[])
   AND EXISTS (SELECT FROM unnest(array_positions(%(ids)s::uuid[], w.id)) AS p(i)
                WHERE (%(org_ids)s::uuid[])[p.i] = w.org_id AND (%(tokens)s::uuid[])[p.i] = w.claim_token
                  AND w.status = 'claimed')
RETURNING w.id, w.org_id, w.attempts, w.claimed_by, w.claimed_at, w.has_dependents
), ended AS (
    SELECT d.org_id, d.id, d.attempts, d.claimed_by, d.claimed_at,
           'done' AS outcome, '' AS error, '' AS traceback
      FROM done d
), attempts AS (
{record_attempts}
), dependents AS (
    SELECT workqueue_move_dependents_v2(array_agg(d.id), '{done,finished}'::text[], -1)
      FROM done d
)
SELECT d.id FROM done d, (SELECT count(*) FROM dependents) AS r
