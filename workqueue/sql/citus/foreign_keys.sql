-- foreign_keys: every foreign key from or to one of the named tables: the table holding it, its name, the table it points at
SELECT c.conrelid::regclass::text, c.conname::text, c.confrelid::regclass::text
  FROM pg_constraint c
 WHERE c.contype = 'f'
   AND c.conparentid = 0
   AND (c.conrelid::regclass::text = ANY (%s) OR c.confrelid::regclass::text = ANY (%s))
 ORDER BY 1, 2
