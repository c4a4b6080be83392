-- erase_count: how many rows of the tenant one table holds (with its history children: no ONLY)
SELECT count(*) FROM {table} WHERE org_id = %(org_id)s::uuid
