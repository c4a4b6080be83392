-- placed: each table Citus already holds, and how ('h' distributed by hash, 'n' reference)
SELECT logicalrelid::regclass::text, partmethod::text FROM pg_dist_partition
