-- caps_in_effect: whether any tenant has an in-flight cap of its own (the fair claim then counts what each tenant holds, one claimer of a lane at a time); one probe of tenantshare_capped_idx, also read inside claim_one.sql
SELECT EXISTS (SELECT FROM workqueue_tenantshare WHERE max_in_flight IS NOT NULL)
