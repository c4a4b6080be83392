-- claim_request_key: record that this user's request with this Idempotency-Key is being answered, in the tenant of the caller's transaction; returns nothing when the key is already held (a concurrent holder is waited for until it commits or rolls back)
-- An answered key may be in history (workqueue/history.py, the timed tables), where the unique index does not reach:
-- the claim asks the table with its children first (an answer moves whole in one statement, so this snapshot sees it
-- in one place or the other).
INSERT INTO workqueue_storedresponse (id, org_id, user_id, key, fingerprint, status_code, body, created_at)
SELECT %(id)s::uuid, %(org_id)s::uuid, %(user_id)s::text, %(key)s::text, %(fingerprint)s::text, NULL, NULL, now()
 WHERE NOT EXISTS (SELECT FROM workqueue_storedresponse h
                    WHERE h.org_id = %(org_id)s::uuid AND h.user_id = %(user_id)s::text AND h.key = %(key)s::text
                      AND h.status_code IS NOT NULL)
ON CONFLICT (org_id, user_id, key) DO NOTHING
RETURNING id
