-- sample_queued_payloads: up to per_kind items of each of the given kinds among those still to run or to triage (waiting, pending, claimed, dead letters), across tenants, with their payloads: what the deploy check validates against the kinds of the code about to run
SELECT s.kind, s.id, s.status, s.payload
  FROM unnest(%(kinds)s::text[]) AS k(kind)
 CROSS JOIN LATERAL (
    SELECT w.kind, w.id, w.status, w.payload
      FROM workqueue_workitem w
     WHERE w.kind = k.kind AND w.status IN ('waiting', 'pending', 'claimed', 'failed')
     LIMIT %(per_kind)s
 ) AS s
