-- minutes_kinds_v1: the gauges page's minutes per kind (workqueue_kindminute), partitioned by day as the lanes' minutes are (minutes_parts_v1): one partition for each day the lanes' minutes have, made and dropped with it by the v2 functions, so a day goes whole for both
CREATE TABLE workqueue_kindminute (
    minute timestamptz NOT NULL,
    org_id uuid NOT NULL,
    lane varchar(50) NOT NULL,
    kind varchar(100) NOT NULL,
    oldest_wait_s double precision NULL,
    runs integer[] NOT NULL,
    CONSTRAINT workqueue_kindminute_pkey PRIMARY KEY (minute, org_id, lane, kind)
) PARTITION BY RANGE (minute);

-- workqueue_minutes_kinds_v1: give each day of the lanes' minutes (workqueue_minutes_part) its partition of the kinds'
-- minutes, named alike (workqueue_kindminute_<day>), where it has none, and drop one whose day is gone; returns how many
-- it made.
CREATE FUNCTION workqueue_minutes_kinds_v1() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
    AS $$
DECLARE
    part record;
    name text;
    made integer := 0;
BEGIN
    -- A partition whose day is gone: a sweep of the release before dropped the day with v1, which knows no kinds.
    FOR part IN
        SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'workqueue_kindminute'::regclass
           AND NOT EXISTS (SELECT FROM workqueue_minutes_part p
                            WHERE c.relname = 'workqueue_kindminute' || substr(p.relname, length('workqueue_laneminute') + 1))
    LOOP
        EXECUTE format('DROP TABLE %I', part.relname);
    END LOOP;
    FOR part IN SELECT p.relname, p.lo, p.hi FROM workqueue_minutes_part p ORDER BY p.lo LOOP
        name := 'workqueue_kindminute' || substr(part.relname, length('workqueue_laneminute') + 1);
        IF to_regclass(quote_ident(name)) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF workqueue_kindminute FOR VALUES FROM (%s) TO (%L)', name,
                           CASE WHEN part.lo = '-infinity' THEN 'MINVALUE' ELSE quote_literal(part.lo) END, part.hi);
            made := made + 1;
        END IF;
    END LOOP;
    RETURN made;
END
$$;

-- workqueue_minutes_keep_v2: v1 (the lanes' days), then each day's partition of the kinds' minutes. Making a partition
-- locks its table for a moment: while a session reads the minutes (a report), the keeper waits 50 ms at most and makes
-- nothing this time (the days are made two ahead: a later pass makes them), so nothing queues behind it.
CREATE FUNCTION workqueue_minutes_keep_v2(p_from timestamptz, p_to timestamptz) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout = '50ms'
    AS $$
DECLARE
    made integer;
BEGIN
    made := workqueue_minutes_keep_v1(p_from, p_to);
    PERFORM workqueue_minutes_kinds_v1();
    RETURN made;
EXCEPTION WHEN lock_not_available THEN
    RETURN 0;
END
$$;

-- workqueue_minutes_drop_v2: drop the days that ended before p_before, both partitions of each (the lanes' and the
-- kinds'), only if no other session holds a lock on either; returns how many days it dropped and how many it left.
CREATE FUNCTION workqueue_minutes_drop_v2(p_before timestamptz, OUT dropped integer, OUT waiting integer)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout = '50ms'
    AS $$
DECLARE
    part record;
    kinds text;
BEGIN
    dropped := 0;
    waiting := 0;
    FOR part IN SELECT p.relname FROM workqueue_minutes_part p WHERE p.hi <= p_before ORDER BY p.lo LOOP
        kinds := 'workqueue_kindminute' || substr(part.relname, length('workqueue_laneminute') + 1);
        IF EXISTS (SELECT FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                    WHERE l.pid <> pg_backend_pid() AND c.relname IN (part.relname, kinds)) THEN
            waiting := waiting + 1;
            CONTINUE;
        END IF;
        BEGIN
            EXECUTE format('DROP TABLE IF EXISTS %I, %I', part.relname, kinds);
            DELETE FROM workqueue_minutes_part p WHERE p.relname = part.relname;
            dropped := dropped + 1;
        EXCEPTION WHEN lock_not_available THEN
            waiting := waiting + 1;
        END;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION workqueue_minutes_kinds_v1() FROM PUBLIC;
REVOKE ALL ON FUNCTION workqueue_minutes_keep_v2(timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION workqueue_minutes_drop_v2(timestamptz) FROM PUBLIC;

-- The sweep's login (the one that may DELETE minutes) runs them from here on, and the table takes the lanes' minutes'
-- rights (a rolling upgrade's workers start before any grant_logins); sql/grants.sql grants the same again at each
-- grant_logins.
DO $$
DECLARE
    acl record;
BEGIN
    FOR acl IN
        SELECT a.grantee, a.privilege_type FROM pg_class c, aclexplode(c.relacl) AS a
         WHERE c.oid = 'workqueue_laneminute'::regclass AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON workqueue_kindminute TO %s', acl.privilege_type,
                       CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(acl.grantee)) END);
    END LOOP;
    FOR acl IN
        SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(c.relacl) AS a
         WHERE c.oid = 'workqueue_laneminute'::regclass AND a.grantee <> c.relowner AND a.grantee <> 0
           AND a.privilege_type = 'DELETE'
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION workqueue_minutes_keep_v2(timestamptz, timestamptz),'
                       ' workqueue_minutes_drop_v2(timestamptz) TO %I', pg_get_userbyid(acl.grantee));
    END LOOP;
END
$$;
SELECT workqueue_minutes_kinds_v1();
