-- rate_grant_v1_reverse: drop the function that grants a claim's picked items what their rate limits allow.
DROP FUNCTION workqueue_rate_grant_v1(uuid[], text[], uuid[], text[], text);
