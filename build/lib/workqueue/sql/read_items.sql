-- read_items: the tenant's items by id or by idempotency key (the read-back after a collision)
SELECT * FROM workqueue_workitem
 WHERE id = ANY(%(ids)s::uuid[]) OR idempotency_key = ANY(%(keys)s::text[])
