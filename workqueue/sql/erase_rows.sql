-- erase_rows: delete up to batch rows of the tenant from one table (with its history children: no ONLY), picked by the table's key, rows another transaction holds skipped; returns how many
WITH doomed AS (
    SELECT {key} FROM {table} WHERE org_id = %(org_id)s::uuid LIMIT %(batch)s FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM {table} AS t USING doomed WHERE {match} RETURNING 1
)
SELECT count(*) FROM gone
