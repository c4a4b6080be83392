-- append_entries: one audit entry per row of the including statement's `entries` (org_id, action, subject_type, subject_id, data), signed by the actor and the request; the trail's one spelling of an entry, for the statements that audit what they change in the same statement
INSERT INTO workqueue_audit_auditentry
       (id, org_id, actor, action, subject_type, subject_id, data, request_id, created_at)
SELECT gen_random_uuid(), e.org_id, %(actor)s::text, e.action, e.subject_type, e.subject_id,
       e.data, %(request_id)s::uuid, now()
  FROM entries e
