-- item_entry_citus: the audit entry dead_letter and requeue_stale append for an item they ended (a dead letter, an item cancelled as asked), as one row of values Citus sends to the tenant's node; sent in the same transaction after the Citus form that ended it
INSERT INTO workqueue_audit_auditentry
       (id, org_id, actor, action, subject_type, subject_id, data, request_id, created_at)
VALUES (gen_random_uuid(), %(org_id)s::uuid, %(actor)s::text, %(action)s::text,
        'workqueue.workitem', %(id)s::text,
        jsonb_build_object('kind', %(kind)s::text, 'attempts', %(attempts)s::int,
                           'permanent', %(permanent)s::boolean,
                           'error', left(%(error)s::text, 2000)),
        %(request_id)s::uuid, now())
