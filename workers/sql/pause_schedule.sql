-- pause_schedule: pause a schedule (a row made for it when it has none) unless it is paused already, with one audit entry per tenant it serves naming the operator; the sweep enqueues nothing for it until it is resumed
WITH changed AS (
    INSERT INTO workqueue_workers_schedulestate AS s
           (name, paused, changed_by, created_at, updated_at)
    VALUES (%(name)s, true, %(actor)s, now(), now())
        ON CONFLICT (name) DO UPDATE SET paused = true, changed_by = EXCLUDED.changed_by,
                                         updated_at = now()
     WHERE NOT s.paused
    RETURNING s.*
), entries AS (
    SELECT t.org_id, 'schedule.paused' AS action, 'workqueue_workers.schedulestate' AS subject_type,
           c.name AS subject_id,
           jsonb_build_object('last_tick', c.last_enqueued_tick, 'skipped', c.skipped,
                              'via', %(via)s::text) AS data
      FROM changed c CROSS JOIN unnest(%(org_ids)s::uuid[]) AS t(org_id)
), audited AS (
{append_entries}
)
SELECT name, paused, last_enqueued_tick, skipped FROM changed
