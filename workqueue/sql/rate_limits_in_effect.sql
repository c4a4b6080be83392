-- rate_limits_in_effect: whether any rate limit is set (the claim then runs with the rate limits' parts)
SELECT EXISTS (SELECT FROM workqueue_ratelimit)
