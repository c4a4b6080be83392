-- erase_running: how many of the tenant's items are claimed (running) now; the erase is refused while any is, unless forced
SELECT count(*) FROM ONLY workqueue_workitem WHERE org_id = %(org_id)s::uuid AND status = 'claimed'
