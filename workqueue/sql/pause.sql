-- pause: stop every worker from claiming the lane's items (kind '': the whole lane) or one kind's, until resumed; items already claimed run on; a lane or kind already paused stays as it was (nothing inserted, nothing audited); appends a queue.paused audit entry under the site's own tenant id
WITH inserted AS (
    INSERT INTO workqueue_pause (lane, kind, paused_by, reason, paused_at)
    VALUES (%(lane)s::text, %(kind)s::text, %(actor)s::text, %(reason)s::text, now())
    ON CONFLICT (lane, kind) DO NOTHING
    RETURNING lane, kind, paused_by, reason, paused_at
), entries AS (
    SELECT %(site_org_id)s::uuid AS org_id, 'queue.paused' AS action,
           'workqueue.pause' AS subject_type,
           i.lane || CASE WHEN i.kind = '' THEN '' ELSE ':' || i.kind END AS subject_id,
           jsonb_build_object('lane', i.lane, 'kind', i.kind, 'reason', i.reason) AS data
      FROM inserted i
), audited AS (
{append_entries}
)
SELECT lane, kind, paused_by, reason, paused_at, true AS changed FROM inserted
UNION ALL
SELECT p.lane, p.kind, p.paused_by, p.reason, p.paused_at, false
  FROM workqueue_pause p
 WHERE p.lane = %(lane)s::text AND p.kind = %(kind)s::text AND NOT EXISTS (SELECT FROM inserted)
