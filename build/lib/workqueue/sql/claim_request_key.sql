-- claim_request_key: record that this user's request with this Idempotency-Key is being answered, in the tenant of the caller's transaction; returns nothing when the key is already held (a concurrent holder is waited for until it commits or rolls back)
INSERT INTO workqueue_storedresponse (id, org_id, user_id, key, fingerprint, status_code, body, created_at)
VALUES (%(id)s::uuid, %(org_id)s::uuid, %(user_id)s::text, %(key)s::text, %(fingerprint)s::text, NULL, NULL, now())
ON CONFLICT (org_id, user_id, key) DO NOTHING
RETURNING id
