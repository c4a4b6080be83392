-- history_v1: done items leave the hot table for history, one set of tables per span of time that the sweep drops whole once past the retention (never a row-by-row DELETE); each an inheritance child of the table it holds rows of, so every reader (the admin, results, statuses, workflows, the API, the enqueue's check that an id or key is taken) reads history through the table it always read
-- A span's item child holds only done items that ended within it: its CHECK says so, and the planner
-- (constraint_exclusion's default, 'partition') leaves it out of every statement that asks for another status (the
-- claim, the lease, the triage, the gauges). The tables that follow an item (its attempts; an app's own, such as the
-- task records, by a row in workqueue_history_follower) move with it into the span's child of theirs, in the statement
-- that moves the item, so a span dropped leaves nothing of its items behind. Children are made and dropped by the
-- functions below, which run as the tables' owner (the logins cannot make tables); each takes its parent's indexes of
-- every row, row-level security policies and grants, so a login reading a child by name sees what it would see through
-- the parent.
CREATE TABLE workqueue_history_span (
    -- The children's names end with it: workqueue_workitem_done_<stamp>, <follower>_done_<stamp>.
    stamp text PRIMARY KEY,
    lo timestamptz NOT NULL,
    hi timestamptz NOT NULL,
    CHECK (lo < hi)
);
CREATE UNIQUE INDEX workqueue_history_span_lo_idx ON workqueue_history_span (lo);
-- A table whose rows go with their item: moved by the item's id in `item_column`.
CREATE TABLE workqueue_history_follower (
    relname name PRIMARY KEY,
    item_column name NOT NULL
);
INSERT INTO workqueue_history_follower (relname, item_column) VALUES ('workqueue_attempt', 'item_id');

-- workqueue_history_share_v1: give a parent's children (or every history child) the parent's grants to the logins, and
-- no other (run when a child is made, and by the logins' grants, sql/grants.sql, after they changed the parents').
CREATE FUNCTION workqueue_history_share_v1(p_parent regclass DEFAULT NULL) RETURNS integer
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
                               SELECT to_regclass(quote_ident(f.relname)) FROM workqueue_history_follower f)
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
            SELECT a.grantee, a.privilege_type FROM pg_class c, aclexplode(c.relacl) AS a
             WHERE c.oid = kid.parent AND a.grantee <> c.relowner
        LOOP
            EXECUTE format('GRANT %s ON %s TO %s', acl.privilege_type, kid.child,
                           CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(acl.grantee)) END);
        END LOOP;
        shared := shared + 1;
    END LOOP;
    RETURN shared;
END
$$;

-- workqueue_history_child_v1: make one child of p_parent named p_child: its columns, p_check as its own CHECK when
-- given, the parent's indexes that hold every row (its key, above all; an index of some statuses only would hold no
-- row of history) and the indexes p_indexes describes (each `(columns) [WHERE ...]`), its row-level security policies
-- and its grants.
CREATE FUNCTION workqueue_history_child_v1(p_parent regclass, p_child name, p_check text, p_indexes text[])
    RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
    AS $$
DECLARE
    pol record;
    idx record;
    body text;
BEGIN
    EXECUTE format('CREATE TABLE %I (%s) INHERITS (%s)', p_child,
                   CASE WHEN p_check IS NULL THEN '' ELSE 'CHECK (' || p_check || ')' END, p_parent);
    FOR idx IN
        SELECT i.indisunique, substring(pg_get_indexdef(i.indexrelid) FROM ' USING (.*)$') AS how
          FROM pg_index i WHERE i.indrelid = p_parent AND i.indpred IS NULL ORDER BY i.indexrelid
    LOOP
        EXECUTE format('CREATE %sINDEX ON %I USING %s', CASE WHEN idx.indisunique THEN 'UNIQUE ' ELSE '' END,
                       p_child, idx.how);
    END LOOP;
    FOREACH body IN ARRAY COALESCE(p_indexes, '{}') LOOP
        EXECUTE format('CREATE INDEX ON %I %s', p_child, body);
    END LOOP;
    -- Nothing in history is updated: full pages.
    EXECUTE format('ALTER TABLE %I SET (fillfactor = 100)', p_child);
    IF (SELECT c.relrowsecurity FROM pg_class c WHERE c.oid = p_parent) THEN
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', p_child);
    END IF;
    IF (SELECT c.relforcerowsecurity FROM pg_class c WHERE c.oid = p_parent) THEN
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', p_child);
    END IF;
    FOR pol IN
        SELECT p.polname, p.polcmd, p.polpermissive, p.polroles,
               pg_get_expr(p.polqual, p.polrelid) AS qual, pg_get_expr(p.polwithcheck, p.polrelid) AS checked
          FROM pg_policy p WHERE p.polrelid = p_parent
    LOOP
        EXECUTE format('CREATE POLICY %I ON %I AS %s FOR %s TO %s%s%s',
            pol.polname, p_child,
            CASE WHEN pol.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,
            CASE pol.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE'
                            WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
            (SELECT string_agg(CASE WHEN r = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(r)) END, ', ')
               FROM unnest(pol.polroles) AS r),
            CASE WHEN pol.qual IS NULL THEN '' ELSE ' USING (' || pol.qual || ')' END,
            CASE WHEN pol.checked IS NULL THEN '' ELSE ' WITH CHECK (' || pol.checked || ')' END);
    END LOOP;
    PERFORM workqueue_history_share_v1(p_parent);
END
$$;

-- workqueue_history_keep_v1: make the spans that cover [p_from, p_to), each p_width_s seconds aligned to the epoch (time
-- a span made under another width already covers is left to it), with their children; returns how many spans it made.
CREATE FUNCTION workqueue_history_keep_v1(p_from timestamptz, p_to timestamptz, p_width_s float8) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
    AS $$
DECLARE
    t timestamptz;
    covering record;
    next_lo timestamptz;
    hi timestamptz;
    stamp text;
    follower record;
    made integer := 0;
BEGIN
    IF p_width_s IS NULL OR p_width_s < 1 THEN
        RAISE EXCEPTION 'a history span is at least a second wide, not % s', p_width_s;
    END IF;
    -- One maker at a time (the sweep holds its mutex; a test or an operator may call it too).
    PERFORM pg_advisory_xact_lock(hashtext('workqueue_history_span'));
    t := to_timestamp(floor(extract(epoch FROM p_from) / p_width_s) * p_width_s);
    WHILE t < p_to LOOP
        SELECT s.lo, s.hi INTO covering FROM workqueue_history_span s WHERE s.lo <= t AND s.hi > t;
        IF FOUND THEN
            t := covering.hi;
            CONTINUE;
        END IF;
        hi := to_timestamp((floor(extract(epoch FROM t) / p_width_s) + 1) * p_width_s);
        SELECT min(s.lo) INTO next_lo FROM workqueue_history_span s WHERE s.lo > t;
        IF next_lo IS NOT NULL AND next_lo < hi THEN
            hi := next_lo;
        END IF;
        stamp := to_char(t AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MISS');
        -- An item of history is looked up by id (its key, the parent's), by idempotency key (the enqueue's question)
        -- and listed newest first (the admin's list of done items).
        PERFORM workqueue_history_child_v1(
            'workqueue_workitem', 'workqueue_workitem_done_' || stamp,
            format('status = %L AND updated_at >= %L AND updated_at < %L', 'done', t, hi),
            ARRAY['(org_id, idempotency_key) WHERE idempotency_key IS NOT NULL', '(updated_at)']);
        FOR follower IN SELECT f.relname FROM workqueue_history_follower f ORDER BY f.relname LOOP
            PERFORM workqueue_history_child_v1(follower.relname::regclass, follower.relname || '_done_' || stamp,
                                               NULL, NULL);
        END LOOP;
        INSERT INTO workqueue_history_span (stamp, lo, hi) VALUES (stamp, t, hi);
        made := made + 1;
        t := hi;
    END LOOP;
    RETURN made;
END
$$;

-- workqueue_history_move_v1: move up to p_batch done items that ended in [p_from, p_before), none of a workflow (their
-- edges and places are purged with them, in the hot table), from the hot table into the span that holds the oldest of
-- them, with the rows that follow them, in one statement; returns how many moved (-1: no span holds the oldest) and the
-- newest updated_at moved (the caller's next p_from). As its caller (the sweep's system login): rows another
-- transaction holds are skipped, and taken at a later pass.
CREATE FUNCTION workqueue_history_move_v1(p_from timestamptz, p_before timestamptz, p_batch integer,
                                          OUT moved integer, OUT through timestamptz)
    LANGUAGE plpgsql SET search_path FROM CURRENT
    AS $$
DECLARE
    first_at timestamptz;
    span record;
    follower record;
    followed text := '';
    n integer := 0;
BEGIN
    moved := 0;
    through := p_from;
    SELECT w.updated_at INTO first_at
      FROM ONLY workqueue_workitem w
     WHERE w.status = 'done' AND w.updated_at >= p_from AND w.updated_at < p_before
       AND w.workflow_id IS NULL AND NOT w.has_dependents
     ORDER BY w.updated_at
     LIMIT 1;
    IF NOT FOUND THEN
        through := p_before;
        RETURN;
    END IF;
    SELECT s.stamp, s.hi INTO span FROM workqueue_history_span s WHERE s.lo <= first_at AND s.hi > first_at;
    IF NOT FOUND THEN
        -- No span holds it (the keeper, which the sweep runs first, had not made it): leave the items where they are.
        moved := -1;
        through := first_at;
        RETURN;
    END IF;
    FOR follower IN SELECT f.relname, f.item_column FROM workqueue_history_follower f ORDER BY f.relname LOOP
        n := n + 1;
        followed := followed || format(
            ', f%s_gone AS (DELETE FROM ONLY %I AS f USING gone WHERE f.%I = gone.id RETURNING f.*)'
            ', f%s_kept AS (INSERT INTO %I (%s) SELECT %s FROM f%s_gone RETURNING 1)',
            n, follower.relname, follower.item_column,
            n, follower.relname || '_done_' || span.stamp,
            workqueue_history_columns_v1(follower.relname::regclass), workqueue_history_columns_v1(follower.relname::regclass), n);
    END LOOP;
    EXECUTE format(
        'WITH doomed AS (
             SELECT w.id FROM ONLY workqueue_workitem w
              WHERE w.status = ''done'' AND w.updated_at >= $1 AND w.updated_at < $2
                AND w.workflow_id IS NULL AND NOT w.has_dependents
              ORDER BY w.updated_at
              LIMIT $3
                FOR UPDATE SKIP LOCKED
         ), gone AS (
             DELETE FROM ONLY workqueue_workitem w USING doomed WHERE w.id = doomed.id RETURNING w.*
         ), kept AS (
             INSERT INTO %I (%s) SELECT %s FROM gone RETURNING updated_at
         )%s
         SELECT count(*)::integer, max(updated_at) FROM kept',
        'workqueue_workitem_done_' || span.stamp,
        workqueue_history_columns_v1('workqueue_workitem'), workqueue_history_columns_v1('workqueue_workitem'), followed)
      INTO moved, through
      USING first_at, least(span.hi, p_before), p_batch;
    through := COALESCE(through, first_at);
END
$$;

-- workqueue_history_columns_v1: a table's columns, in order, quoted (what a move inserts, by name).
CREATE FUNCTION workqueue_history_columns_v1(p_table regclass) RETURNS text
    LANGUAGE sql STABLE SET search_path FROM CURRENT
    AS $$
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum)
      FROM pg_attribute a
     WHERE a.attrelid = p_table AND a.attnum > 0 AND NOT a.attisdropped
$$;

-- workqueue_history_drop_v1: drop the spans that ended before p_before, each with its children, only if no other
-- session holds a lock on one of them (a report reading it: it is dropped at a later pass, and nothing queues behind a
-- drop that waits); returns how many it dropped and how many it left for later.
CREATE FUNCTION workqueue_history_drop_v1(p_before timestamptz, OUT dropped integer, OUT waiting integer)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout = '50ms'
    AS $$
DECLARE
    span record;
    kids text;
BEGIN
    dropped := 0;
    waiting := 0;
    FOR span IN SELECT s.stamp FROM workqueue_history_span s WHERE s.hi <= p_before ORDER BY s.lo LOOP
        SELECT string_agg(format('%I', c.relname), ', ') INTO kids
          FROM pg_class c
         WHERE c.relname IN (SELECT 'workqueue_workitem_done_' || span.stamp
                             UNION ALL
                             SELECT f.relname || '_done_' || span.stamp FROM workqueue_history_follower f);
        IF EXISTS (SELECT FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                    WHERE l.pid <> pg_backend_pid()
                      AND c.relname IN (SELECT 'workqueue_workitem_done_' || span.stamp
                                        UNION ALL
                                        SELECT f.relname || '_done_' || span.stamp FROM workqueue_history_follower f)) THEN
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

REVOKE ALL ON FUNCTION workqueue_history_share_v1(regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION workqueue_history_child_v1(regclass, name, text, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION workqueue_history_keep_v1(timestamptz, timestamptz, float8) FROM PUBLIC;
REVOKE ALL ON FUNCTION workqueue_history_move_v1(timestamptz, timestamptz, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION workqueue_history_drop_v1(timestamptz) FROM PUBLIC;
