-- sample_queued_payloads: up to per_kind items of each of the given kinds among those still to run or to triage (waiting, pending, claimed, dead letters), across tenants, with their payloads: what the deploy check validates against the kinds of the code about to run
-- Each status is read where an index holds it, never by a walk of the done items: pending items from the ready ring, claimed
-- ones by workitem_stale_idx, dead letters by workitem_triage_idx, waiting steps by workitem_workflow_idx.
SELECT s.kind, s.id, s.status, s.payload
  FROM unnest(%(kinds)s::text[]) AS k(kind)
 CROSS JOIN LATERAL (
    (SELECT w.kind, w.id, w.status, w.payload
       FROM workqueue_ready r JOIN workqueue_workitem w ON w.id = r.id AND w.status = 'pending'
      WHERE r.kind = k.kind LIMIT %(per_kind)s)
    UNION ALL
    (SELECT w.kind, w.id, w.status, w.payload FROM workqueue_workitem w
      WHERE w.status = 'claimed' AND w.kind = k.kind LIMIT %(per_kind)s)
    UNION ALL
    (SELECT w.kind, w.id, w.status, w.payload FROM workqueue_workitem w
      WHERE w.status = 'failed' AND w.kind = k.kind LIMIT %(per_kind)s)
    UNION ALL
    (SELECT w.kind, w.id, w.status, w.payload FROM workqueue_workitem w
      WHERE w.workflow_id IS NOT NULL AND w.status = 'waiting' AND w.kind = k.kind LIMIT %(per_kind)s)
    LIMIT %(per_kind)s
 ) AS s
