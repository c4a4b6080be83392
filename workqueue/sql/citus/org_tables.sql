-- org_tables: every table of the current schema with an org_id column (a partition's parent stands for it)
SELECT c.relname::text
  FROM pg_attribute a
  JOIN pg_class c ON c.oid = a.attrelid
 WHERE c.relnamespace = current_schema()::regnamespace
   AND c.relkind IN ('r', 'p')
   AND NOT c.relispartition
   AND a.attname = 'org_id'
   AND NOT a.attisdropped
 ORDER BY 1
