-- resume: let workers claim a paused lane's (kind '': the whole lane's) or kind's items again; wake them at once (announce the lane on work_available, delivered at commit); appends a queue.resumed audit entry under the site's own tenant id; a lane or kind not paused changes nothing and returns no row
WITH deleted AS (
    DELETE FROM workqueue_pause
     WHERE lane = %(lane)s::text AND kind = %(kind)s::text
    RETURNING lane, kind, paused_by, reason, paused_at
), entries AS (
    SELECT %(site_org_id)s::uuid AS org_id, 'queue.resumed' AS action,
           'workqueue.pause' AS subject_type,
           d.lane || CASE WHEN d.kind = '' THEN '' ELSE ':' || d.kind END AS subject_id,
           jsonb_build_object('lane', d.lane, 'kind', d.kind, 'paused_by', d.paused_by,
                              'paused_at', d.paused_at, 'reason', d.reason) AS data
      FROM deleted d
), audited AS (
{append_entries}
), announced AS (
    SELECT pg_notify('work_available', d.lane) FROM deleted d
)
SELECT lane, kind, paused_by, reason, paused_at, (SELECT count(*) FROM announced) AS announced
  FROM deleted
