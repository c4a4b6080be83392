-- erase_audit: append one entry of an erase (queue.erase_started, queue.erase_finished) under the site's own tenant id, so the tenant's erase never reaches it
WITH entries AS (
    SELECT %(site_org_id)s::uuid AS org_id, %(action)s::text AS action,
           %(subject_type)s::text AS subject_type, %(subject_id)s::text AS subject_id,
           %(data)s::jsonb AS data
), audited AS (
{append_entries}
)
SELECT 1
