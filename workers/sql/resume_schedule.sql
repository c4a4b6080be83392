-- resume_schedule: resume a paused schedule, with one audit entry per tenant it serves naming the operator; it starts afresh at its next tick (what came due while it was paused neither fires late nor counts as skipped)
WITH changed AS (
    UPDATE workqueue_workers_schedulestate
       SET paused = false, last_tick = NULL, delivered = true, changed_by = %(actor)s,
           updated_at = now()
     WHERE name = %(name)s AND paused
    RETURNING *
), entries AS (
    SELECT t.org_id, 'schedule.resumed' AS action, 'workqueue_workers.schedulestate' AS subject_type,
           c.name AS subject_id,
           jsonb_build_object('last_tick', c.last_enqueued_tick, 'skipped', c.skipped,
                              'via', %(via)s::text) AS data
      FROM changed c CROSS JOIN unnest(%(org_ids)s::uuid[]) AS t(org_id)
), audited AS (
{append_entries}
)
SELECT name, paused, last_enqueued_tick, skipped FROM changed
