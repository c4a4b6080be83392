-- keys: a table's primary key and unique constraints, each with its columns in order
SELECT c.conname::text, c.contype::text,
       array_agg(a.attname::text ORDER BY k.ord)
  FROM pg_constraint c
 CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
  JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
 WHERE c.conrelid = %s::regclass
   AND c.contype IN ('p', 'u')
 GROUP BY c.conname, c.contype
 ORDER BY 1
