-- rate_grant_v2_reverse: drop the function whose path of its own grants a claim whose items fall in one bucket.
DROP FUNCTION workqueue_rate_grant_v2(uuid[], text[], uuid[], text[], text);
