-- named_keys: which of the named constraints exist (the foreign keys that replace the triggers)
SELECT conname::text FROM pg_constraint WHERE conname = ANY (%s)
