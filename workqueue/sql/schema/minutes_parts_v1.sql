-- minutes_parts_v1: the gauges page's minutes become a table partitioned by day (by the minute's UTC day), so the retention drops whole days instead of deleting rows one by one; the table as it was becomes the partition of everything before the day after tomorrow, and the sweep makes the days after it ahead and drops each one once past ROLLUP_RETENTION_S
-- Attaching the old table checks its rows under its lock (two days of minutes: only the sweep and the gauges page read
-- it, and wait). The new table takes the old one's rights; the partitions have none, so every login reads and writes
-- through the table (whose row-level security, the next step of the migration, holds there).
CREATE TABLE workqueue_minutes_part (
    relname name PRIMARY KEY,
    lo timestamptz NOT NULL,
    hi timestamptz NOT NULL,
    CHECK (lo < hi)
);

DO $$
DECLARE
    bound timestamptz := date_trunc('day', now(), 'UTC') + interval '2 days';
    acl record;
BEGIN
    LOCK TABLE workqueue_laneminute IN ACCESS EXCLUSIVE MODE;
    ALTER TABLE workqueue_laneminute RENAME TO workqueue_laneminute_before;
    ALTER INDEX workqueue_laneminute_pkey RENAME TO workqueue_laneminute_before_pkey;
    CREATE TABLE workqueue_laneminute (LIKE workqueue_laneminute_before INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
        PARTITION BY RANGE (minute);
    ALTER TABLE workqueue_laneminute ADD CONSTRAINT workqueue_laneminute_pkey PRIMARY KEY (minute, org_id, lane);
    EXECUTE format('ALTER TABLE workqueue_laneminute ATTACH PARTITION workqueue_laneminute_before'
                   ' FOR VALUES FROM (MINVALUE) TO (%L)', bound);
    INSERT INTO workqueue_minutes_part (relname, lo, hi) VALUES ('workqueue_laneminute_before', '-infinity', bound);
    FOR acl IN
        SELECT a.grantee, a.privilege_type FROM pg_class c, aclexplode(c.relacl) AS a
         WHERE c.oid = 'workqueue_laneminute_before'::regclass AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON workqueue_laneminute TO %s', acl.privilege_type,
                       CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(acl.grantee)) END);
        EXECUTE format('REVOKE %s ON workqueue_laneminute_before FROM %s', acl.privilege_type,
                       CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(acl.grantee)) END);
    END LOOP;
END
$$;

-- workqueue_minutes_keep_v1: make the day partitions that cover [p_from, p_to) (time a partition already covers is
-- left to it); returns how many it made.
CREATE FUNCTION workqueue_minutes_keep_v1(p_from timestamptz, p_to timestamptz) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
    AS $$
DECLARE
    t timestamptz := date_trunc('day', p_from, 'UTC');
    covering record;
    hi timestamptz;
    next_lo timestamptz;
    name text;
    made integer := 0;
BEGIN
    -- One maker at a time (the sweep holds its mutex; a test or an operator may call it too).
    PERFORM pg_advisory_xact_lock(hashtext('workqueue_minutes_part'));
    WHILE t < p_to LOOP
        SELECT p.lo, p.hi INTO covering FROM workqueue_minutes_part p WHERE p.lo <= t AND p.hi > t;
        IF FOUND THEN
            t := covering.hi;
            CONTINUE;
        END IF;
        hi := date_trunc('day', t, 'UTC') + interval '1 day';
        SELECT min(p.lo) INTO next_lo FROM workqueue_minutes_part p WHERE p.lo > t;
        IF next_lo IS NOT NULL AND next_lo < hi THEN
            hi := next_lo;
        END IF;
        name := 'workqueue_laneminute_' || to_char(t AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MISS');
        EXECUTE format('CREATE TABLE %I PARTITION OF workqueue_laneminute FOR VALUES FROM (%L) TO (%L)', name, t, hi);
        INSERT INTO workqueue_minutes_part (relname, lo, hi) VALUES (name, t, hi);
        made := made + 1;
        t := hi;
    END LOOP;
    RETURN made;
END
$$;

-- workqueue_minutes_drop_v1: drop the partitions whose days ended before p_before, each only if no other session holds
-- a lock on it (dropping a partition locks the table for a moment: a drop that would wait is left for a later pass, so
-- nothing queues behind it); returns how many it dropped and how many it left for later.
CREATE FUNCTION workqueue_minutes_drop_v1(p_before timestamptz, OUT dropped integer, OUT waiting integer)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout = '50ms'
    AS $$
DECLARE
    part record;
BEGIN
    dropped := 0;
    waiting := 0;
    FOR part IN SELECT p.relname FROM workqueue_minutes_part p WHERE p.hi <= p_before ORDER BY p.lo LOOP
        IF EXISTS (SELECT FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                    WHERE l.pid <> pg_backend_pid() AND c.relname = part.relname) THEN
            waiting := waiting + 1;
            CONTINUE;
        END IF;
        BEGIN
            EXECUTE format('DROP TABLE IF EXISTS %I', part.relname);
            DELETE FROM workqueue_minutes_part p WHERE p.relname = part.relname;
            dropped := dropped + 1;
        EXCEPTION WHEN lock_not_available THEN
            waiting := waiting + 1;
        END;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION workqueue_minutes_keep_v1(timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION workqueue_minutes_drop_v1(timestamptz) FROM PUBLIC;

-- The sweep's login (the one that may DELETE minutes) runs them from here on; sql/grants.sql grants the same again at
-- each grant_logins.
DO $$
DECLARE
    acl record;
BEGIN
    FOR acl IN
        SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(c.relacl) AS a
         WHERE c.oid = 'workqueue_laneminute'::regclass AND a.grantee <> c.relowner AND a.grantee <> 0
           AND a.privilege_type = 'DELETE'
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION workqueue_minutes_keep_v1(timestamptz, timestamptz),'
                       ' workqueue_minutes_drop_v1(timestamptz) TO %I', pg_get_userbyid(acl.grantee));
    END LOOP;
END
$$;
