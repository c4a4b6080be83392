-- erase_subject_rows: redact the personal fields (fields) of up to batch rows of one table carrying items' payloads (the outbox's) whose kind is `kind` and whose payload names the subject (field = value), of one tenant or every one, rows another transaction holds skipped; returns how many
WITH doomed AS (
    SELECT {key} FROM {table}
     WHERE kind = %(kind)s::text AND payload ->> %(field)s::text = %(value)s::text
       AND (%(org_id)s::uuid IS NULL OR org_id = %(org_id)s::uuid)
     LIMIT %(batch)s FOR UPDATE SKIP LOCKED
), redacted AS (
    UPDATE {table} AS t
       SET payload = t.payload || COALESCE(
               (SELECT jsonb_object_agg(k, %(mark)s::jsonb) FROM jsonb_object_keys(t.payload) AS k
                 WHERE k = ANY(%(fields)s::text[])), '{}'::jsonb)
      FROM doomed WHERE {match}
    RETURNING 1
)
SELECT count(*) FROM redacted
