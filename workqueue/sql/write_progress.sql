-- write_progress: for each (org, id, token) still held under that token, across tenants, replace the item's progress with the JSON object at its place in `progress` stamped with now() (NULL there: keep it) and merge the object at its place in `meta` into its metadata (NULL: none); returns the ids written
-- Each row is found by its key and fenced by its own places in the arrays, its status inside that test (complete_many
-- says why); its values are those of the place whose fence matched (an id given twice: the one whose token holds it).
-- No indexed column changes (not even updated_at: a report is not a transition), so the write can be a HOT update.
UPDATE ONLY workqueue_workitem AS w
   SET (progress, meta) = (
       SELECT COALESCE(((%(progress)s::text[])[p.i])::jsonb || jsonb_build_object('at', now()), w.progress),
              w.meta || COALESCE(((%(meta)s::text[])[p.i])::jsonb, '{}'::jsonb)
         FROM unnest(array_positions(%(ids)s::uuid[], w.id)) AS p(i)
        WHERE (%(org_ids)s::uuid[])[p.i] = w.org_id AND (%(tokens)s::uuid[])[p.i] = w.claim_token
        LIMIT 1)
 WHERE w.id = ANY(%(ids)s::uuid[])
   AND EXISTS (SELECT FROM unnest(array_positions(%(ids)s::uuid[], w.id)) AS p(i)
                WHERE (%(org_ids)s::uuid[])[p.i] = w.org_id AND (%(tokens)s::uuid[])[p.i] = w.claim_token
                  AND w.status = 'claimed')
RETURNING w.id
