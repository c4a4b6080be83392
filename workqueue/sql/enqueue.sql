-- enqueue: one item through workqueue_enqueue (sql/enqueue_function.sql): tenant, insert and notice in one statement
SELECT * FROM workqueue_enqueue(
    %(org_id)s::uuid, %(id)s::uuid, %(kind)s::text, %(lane)s::text, %(payload)s::jsonb,
    %(idempotency_key)s::text, %(priority)s::smallint, %(available_at)s::timestamptz,
    %(max_attempts)s::integer, %(created_by)s::uuid, %(request_id)s::uuid, %(traceparent)s::text)
