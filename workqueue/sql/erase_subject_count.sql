-- erase_subject_count: how many items of one kind carry the subject (field = value) in their payload, of one tenant or every one, and how many of those are claimed (running) now
SELECT count(*), count(*) FILTER (WHERE w.status = 'claimed') FROM workqueue_workitem AS w
 WHERE w.kind = %(kind)s::text AND w.payload ->> %(field)s::text = %(value)s::text
   AND (%(org_id)s::uuid IS NULL OR w.org_id = %(org_id)s::uuid)
