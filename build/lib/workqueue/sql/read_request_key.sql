-- read_request_key: the request fingerprint and stored answer of this user's Idempotency-Key in the tenant
SELECT fingerprint, status_code, body
  FROM workqueue_storedresponse
 WHERE user_id = %(user_id)s::text AND key = %(key)s::text
