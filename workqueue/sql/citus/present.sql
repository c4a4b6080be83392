-- present: which of the named tables exist in the current schema
SELECT c.relname::text
  FROM pg_class c
 WHERE c.relnamespace = current_schema()::regnamespace
   AND c.relkind IN ('r', 'p')
   AND c.relname = ANY (%s)
