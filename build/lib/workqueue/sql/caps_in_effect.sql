-- caps_in_effect: whether any tenant has an in-flight cap of its own (the fair claim then counts what each tenant holds, one claimer of a lane at a time)
SELECT EXISTS (SELECT FROM workqueue_tenantshare WHERE max_in_flight IS NOT NULL)
