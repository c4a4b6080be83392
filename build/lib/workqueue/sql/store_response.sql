-- store_response: keep the answer given under a claimed Idempotency-Key, so a retry gets it again
UPDATE workqueue_storedresponse
   SET status_code = %(status_code)s::smallint, body = %(body)s::jsonb
 WHERE id = %(id)s::uuid
RETURNING id
