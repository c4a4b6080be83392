-- erase_subject_rows_count: how many rows of one table carrying items' payloads (the outbox's) of kind `kind` name the subject (field = value), of one tenant or every one
SELECT count(*) FROM {table}
 WHERE kind = %(kind)s::text AND payload ->> %(field)s::text = %(value)s::text
   AND (%(org_id)s::uuid IS NULL OR org_id = %(org_id)s::uuid)
