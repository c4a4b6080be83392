-- history_timed_v1: tables whose finished rows go to history by a time of their own (the API's stored answers by when they were made; the relayed outbox rows, registered by the outbox app, by when they were relayed), in the items' spans: each span has a child of each, made with the span's, dropped whole once past the table's own retention and with the span at the latest, never row by row
-- A table's rows move only once finished (`finished`), so what is in flight stays in the hot table with its unique keys;
-- a row moves whole in one statement, so a statement that asks whether a key is taken (the stored answers' claim) asks
-- the table with its children and finds it in one place or the other, in any snapshot.
CREATE TABLE workqueue_history_timed (
    relname name PRIMARY KEY,
    time_column name NOT NULL,
    finished text NOT NULL
);
INSERT INTO workqueue_history_timed (relname, time_column, finished)
VALUES ('workqueue_storedresponse', 'created_at', 'status_code IS NOT NULL');

-- workqueue_history_timed_kids_v1: make each timed table's child of each span that lacks one (a span made before the
-- table was registered); returns how many it made. Called by the keeper after it made its spans.
CREATE FUNCTION workqueue_history_timed_kids_v1() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
    AS $$
DECLARE
    span record;
    timed record;
    made integer := 0;
BEGIN
    FOR span IN SELECT s.stamp, s.lo, s.hi FROM workqueue_history_span s ORDER BY s.lo LOOP
        FOR timed IN
            SELECT t.relname, t.time_column, t.finished FROM workqueue_history_timed t
             WHERE to_regclass(quote_ident(t.relname)) IS NOT NULL
               AND to_regclass(quote_ident(t.relname || '_done_' || span.stamp)) IS NULL
             ORDER BY t.relname
        LOOP
            PERFORM workqueue_history_child_v1(
                timed.relname::regclass, timed.relname || '_done_' || span.stamp,
                format('%s AND %I >= %L AND %I < %L', timed.finished, timed.time_column, span.lo, timed.time_column,
                       span.hi),
                NULL);
            made := made + 1;
        END LOOP;
    END LOOP;
    RETURN made;
END
$$;

-- workqueue_history_untime_v1: take timed table p_table out of history: every row its children hold back into it (as
-- the owner, who sees every tenant's rows while it says so), the children dropped, its registration deleted (a
-- migration's reverse).
CREATE FUNCTION workqueue_history_untime_v1(p_table name) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
    AS $$
DECLARE
    kid record;
    cols text := workqueue_history_columns_v1(p_table::regclass);
    undone integer := 0;
BEGIN
    PERFORM set_config('app.all_tenants', 'on', true);
    FOR kid IN SELECT i.inhrelid::regclass AS child FROM pg_inherits i WHERE i.inhparent = p_table::regclass LOOP
        EXECUTE format('WITH back AS (DELETE FROM %s RETURNING *) INSERT INTO %I (%s) SELECT %s FROM back',
                       kid.child, p_table, cols, cols);
        EXECUTE format('DROP TABLE %s', kid.child);
        undone := undone + 1;
    END LOOP;
    PERFORM set_config('app.all_tenants', '', true);
    DELETE FROM workqueue_history_timed t WHERE t.relname = p_table;
    RETURN undone;
END
$$;

-- The keeper makes the timed tables' children with its spans: v1, and then the children the spans lack.
ALTER FUNCTION workqueue_history_keep_v1(timestamptz, timestamptz, float8) RENAME TO workqueue_history_keep_spans_v1;
CREATE FUNCTION workqueue_history_keep_v1(p_from timestamptz, p_to timestamptz, p_width_s float8) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
    AS $$
DECLARE
    made integer;
BEGIN
    made := workqueue_history_keep_spans_v1(p_from, p_to, p_width_s);
    PERFORM workqueue_history_timed_kids_v1();
    RETURN made;
END
$$;

-- workqueue_history_move_timed_v1: move up to p_batch finished rows of timed table p_table whose time is in [p_from,
-- p_before), oldest first, into the span's child that holds the oldest, in one statement; returns how many moved (-1: no
-- child holds the oldest) and the newest time moved (the caller's next p_from). Rows another transaction holds are
-- skipped, and taken at a later pass.
CREATE FUNCTION workqueue_history_move_timed_v1(p_table name, p_from timestamptz, p_before timestamptz, p_batch integer,
                                                OUT moved integer, OUT through timestamptz)
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    timed record;
    first_at timestamptz;
    span record;
    kid text;
    cols text;
BEGIN
    moved := 0;
    through := p_from;
    SELECT t.relname, t.time_column, t.finished INTO timed FROM workqueue_history_timed t WHERE t.relname = p_table;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no timed history table named %', p_table;
    END IF;
    EXECUTE format('SELECT r.%2$I FROM ONLY %1$I r WHERE (%3$s) AND r.%2$I >= $1 AND r.%2$I < $2 ORDER BY r.%2$I LIMIT 1',
                   timed.relname, timed.time_column, timed.finished)
       INTO first_at USING p_from, p_before;
    IF first_at IS NULL THEN
        through := p_before;
        RETURN;
    END IF;
    SELECT s.stamp, s.hi INTO span FROM workqueue_history_span s WHERE s.lo <= first_at AND s.hi > first_at;
    kid := timed.relname || '_done_' || span.stamp;
    IF span.stamp IS NULL OR to_regclass(quote_ident(kid)) IS NULL THEN
        moved := -1;
        through := first_at;
        RETURN;
    END IF;
    cols := workqueue_history_columns_v1(timed.relname::regclass);
    EXECUTE format(
        'WITH doomed AS (
             SELECT r.ctid FROM ONLY %1$I r
              WHERE (%3$s) AND r.%2$I >= $1 AND r.%2$I < $2
              ORDER BY r.%2$I
              LIMIT $3
                FOR UPDATE SKIP LOCKED
         ), gone AS (
             DELETE FROM ONLY %1$I r USING doomed WHERE r.ctid = doomed.ctid RETURNING r.*
         ), kept AS (
             INSERT INTO %4$I (%5$s) SELECT %5$s FROM gone RETURNING %2$I
         )
         SELECT count(*)::integer, max(%2$I) FROM kept',
        timed.relname, timed.time_column, timed.finished, kid, cols)
      INTO moved, through
      USING first_at, least(span.hi, p_before), p_batch;
    through := COALESCE(through, first_at);
END
$$;

-- workqueue_history_drop_v2: drop each timed table's children whose span ended before its own retention's edge
-- (p_tables[i] before p_befores[i]) or is gone, then what v1 drops: the spans that ended before p_before, with every child left,
-- each only if no other session holds a lock on it; returns how many tables it dropped and how many it left for later.
CREATE FUNCTION workqueue_history_drop_v2(p_before timestamptz, p_tables name[], p_befores timestamptz[],
                                          OUT dropped integer, OUT waiting integer)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout = '50ms'
    AS $$
DECLARE
    kid record;
    span record;
    kids text;
    others boolean;
BEGIN
    dropped := 0;
    waiting := 0;
    FOR kid IN
        SELECT t.relname || '_done_' || s.stamp AS relname
          FROM workqueue_history_span s, workqueue_history_timed t, unnest(p_tables, p_befores) AS r(relname, before)
         WHERE r.relname = t.relname AND s.hi <= r.before
           AND to_regclass(quote_ident(t.relname || '_done_' || s.stamp)) IS NOT NULL
        UNION ALL
        -- A child whose span is gone: a sweep of the release before dropped the span with v1, which knows no timed table.
        SELECT c.relname
          FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid, workqueue_history_timed t
         WHERE i.inhparent = to_regclass(quote_ident(t.relname))
           AND NOT EXISTS (SELECT FROM workqueue_history_span s WHERE c.relname = t.relname || '_done_' || s.stamp)
    LOOP
        IF EXISTS (SELECT FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                    WHERE l.pid <> pg_backend_pid() AND c.relname = kid.relname) THEN
            waiting := waiting + 1;
            CONTINUE;
        END IF;
        BEGIN
            EXECUTE format('DROP TABLE %I', kid.relname);
            dropped := dropped + 1;
        EXCEPTION WHEN lock_not_available THEN
            waiting := waiting + 1;
        END;
    END LOOP;
    FOR span IN SELECT s.stamp FROM workqueue_history_span s WHERE s.hi <= p_before ORDER BY s.lo LOOP
        SELECT string_agg(format('%I', c.relname), ', '),
               bool_or(EXISTS (SELECT FROM pg_locks l WHERE l.relation = c.oid AND l.pid <> pg_backend_pid()))
          INTO kids, others
          FROM pg_class c
         WHERE c.relname IN (SELECT 'workqueue_workitem_done_' || span.stamp
                             UNION ALL
                             SELECT f.relname || '_done_' || span.stamp FROM workqueue_history_follower f
                             UNION ALL
                             SELECT t.relname || '_done_' || span.stamp FROM workqueue_history_timed t);
        IF others THEN
            waiting := waiting + 1;
            CONTINUE;
        END IF;
        BEGIN
            IF kids IS NOT NULL THEN
                EXECUTE 'DROP TABLE ' || kids;
            END IF;
            DELETE FROM workqueue_history_span s WHERE s.stamp = span.stamp;
            dropped := dropped + 1;
        EXCEPTION WHEN lock_not_available THEN
            waiting := waiting + 1;
        END;
    END LOOP;
END
$$;

-- A child's only rights are the mover's (history_share_v2), for the timed tables' children too.
CREATE OR REPLACE FUNCTION workqueue_history_share_v1(p_parent regclass DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
    AS $$
DECLARE
    kid record;
    acl record;
    shared integer := 0;
BEGIN
    FOR kid IN
        SELECT i.inhrelid::regclass AS child, i.inhparent::regclass AS parent
          FROM pg_inherits i
         WHERE i.inhparent IN (SELECT 'workqueue_workitem'::regclass
                               UNION ALL
                               SELECT to_regclass(quote_ident(f.relname)) FROM workqueue_history_follower f
                               UNION ALL
                               SELECT to_regclass(quote_ident(t.relname)) FROM workqueue_history_timed t)
           AND (p_parent IS NULL OR i.inhparent = p_parent)
    LOOP
        FOR acl IN
            SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(c.relacl) AS a
             WHERE c.oid = kid.child AND a.grantee <> c.relowner
        LOOP
            EXECUTE format('REVOKE ALL ON %s FROM %s', kid.child,
                           CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(acl.grantee)) END);
        END LOOP;
        FOR acl IN
            SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(c.relacl) AS a
             WHERE c.oid = kid.parent AND a.grantee <> c.relowner AND a.grantee <> 0 AND a.privilege_type = 'DELETE'
        LOOP
            EXECUTE format('GRANT SELECT, INSERT ON %s TO %s', kid.child, quote_ident(pg_get_userbyid(acl.grantee)));
        END LOOP;
        shared := shared + 1;
    END LOOP;
    RETURN shared;
END
$$;

REVOKE ALL ON FUNCTION workqueue_history_timed_kids_v1() FROM PUBLIC;
REVOKE ALL ON FUNCTION workqueue_history_untime_v1(name) FROM PUBLIC;
REVOKE ALL ON FUNCTION workqueue_history_keep_spans_v1(timestamptz, timestamptz, float8) FROM PUBLIC;
REVOKE ALL ON FUNCTION workqueue_history_keep_v1(timestamptz, timestamptz, float8) FROM PUBLIC;
REVOKE ALL ON FUNCTION workqueue_history_move_timed_v1(name, timestamptz, timestamptz, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION workqueue_history_drop_v2(timestamptz, name[], timestamptz[]) FROM PUBLIC;

-- The sweep's login (the one that may DELETE items) runs them from here on, as it ran v1's; sql/grants.sql grants the
-- same again at each grant_logins.
DO $$
DECLARE
    acl record;
BEGIN
    FOR acl IN
        SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(c.relacl) AS a
         WHERE c.oid = 'workqueue_workitem'::regclass AND a.grantee <> c.relowner AND a.grantee <> 0
           AND a.privilege_type = 'DELETE'
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION workqueue_history_keep_v1(timestamptz, timestamptz, float8),'
                       ' workqueue_history_move_timed_v1(name, timestamptz, timestamptz, integer),'
                       ' workqueue_history_drop_v2(timestamptz, name[], timestamptz[]) TO %I',
                       pg_get_userbyid(acl.grantee));
        EXECUTE format('GRANT SELECT ON workqueue_history_timed TO %I', pg_get_userbyid(acl.grantee));
    END LOOP;
END
$$;
SELECT workqueue_history_timed_kids_v1();
