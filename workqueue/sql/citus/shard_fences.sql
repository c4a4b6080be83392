-- shard_fences: each of the queue's tables Citus holds under row-level security, its shard placements, and how many of them lack ENABLE and FORCE row-level security or either policy (asked on each placement's node)
SELECT p.logicalrelid::regclass::text,
       count(*),
       count(*) FILTER (WHERE r.result <> 't')
  FROM pg_dist_partition p
 CROSS JOIN LATERAL run_command_on_placements(
         p.logicalrelid,
         $$SELECT c.relrowsecurity AND c.relforcerowsecurity
                  AND (SELECT count(*) FROM pg_policy WHERE polrelid = c.oid
                        AND polname IN ('tenant_isolation', 'owner_all_tenants')) = 2
             FROM pg_class c WHERE c.oid = '%s'::regclass$$) r
 WHERE p.logicalrelid::regclass::text LIKE 'workqueue\_%'
   AND EXISTS (SELECT FROM pg_policy WHERE polrelid = p.logicalrelid)
 GROUP BY 1
 ORDER BY 1
