-- claim_set: what a claim writes on each item it takes, besides its status (the one spelling for claim.sql, claim_oldest_first.sql and claim_one.sql, after their status = 'claimed'): claimed by the worker, a fresh claim token, a lease of lease_s from now, one attempt spent, signed as the queue's own
claimed_by = %(worker_id)s::text,
       claimed_at = now(),
       claim_token = gen_random_uuid(),
       lease_expires_at = now() + make_interval(secs => %(lease_s)s::float8),
       attempts = w.attempts + 1,
       updated_at = now(),
       updated_by = {system_actor}
