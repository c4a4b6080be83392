-- ready_v2: the ready ring's rotation, version 2 (workqueue_rotate_ready_v2): as version 1 (ready_v1.sql), but a backlog slot is emptied once its claims have left more dead rows in it than it holds live ones; version 1 stays for the workers of the release before
-- One rotation of the ring, by one rotator at a time (the mutex row `workqueue.ready`; another's turn returns at
-- once): promote the later items now within reach; give a ready row to each pending item that has none (written by
-- a release before the ring, or at the upgrade: its ringed_at is not its updated_at; spelled as the
-- partial index workitem_unringed_idx says it, so the planner reads that index); then empty each ring slot of
-- neither this second nor the last whose file has grown to min_bytes, moving what it still holds (pending items
-- only) into this second's slot or slot 0 first, unless it holds more than max_rows (a backlog: emptying it would
-- rewrite the backlog; it waits for a later turn) and no more dead rows than live ones (by the statistics): a backlog
-- whose claims have left more dead rows than it still holds is emptied all the same, since every claim of it walks
-- those (a held snapshot keeps them from VACUUM), and that costs more than copying what is left once; without this a
-- backlog past max_rows a slot would slow every claim until it never drained. A slot another transaction holds a
-- lock on past lock_timeout_ms (a long report reading it, a pg_dump) is left for the next turn. Returns what it did.
CREATE FUNCTION workqueue_rotate_ready_v2(min_bytes bigint, max_rows integer, batch integer, lock_timeout_ms integer,
                                          OUT turn boolean, OUT promoted integer, OUT adopted integer,
                                          OUT emptied integer, OUT moved integer, OUT held integer)
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    second bigint := floor(extract(epoch FROM now()))::bigint;
    slot_now smallint := (1 + mod(second, 4))::smallint;
    slot_last smallint := (1 + mod(second - 1, 4))::smallint;
    s smallint;
    partition text;
    size bigint;
    found_rows integer;
    n integer;
BEGIN
    promoted := 0; adopted := 0; emptied := 0; moved := 0; held := 0;
    -- The mutex row is the migration's; made again here if it is gone (a table emptied).
    INSERT INTO workqueue_mutex (name) VALUES ('workqueue.ready') ON CONFLICT DO NOTHING;
    PERFORM 1 FROM workqueue_mutex WHERE name = 'workqueue.ready' FOR UPDATE SKIP LOCKED;
    turn := FOUND;
    IF NOT turn THEN
        RETURN;
    END IF;
    PERFORM set_config('lock_timeout', lock_timeout_ms::text || 'ms', true);

    WITH due AS (
        DELETE FROM workqueue_ready_later r
         WHERE r.ctid = ANY(ARRAY(SELECT l.ctid FROM workqueue_ready_later l
                                   WHERE l.available_at <= now() + workqueue_ready_reach()
                                   ORDER BY l.available_at LIMIT batch))
        RETURNING r.*
    )
    INSERT INTO workqueue_ready (slot, id, org_id, lane, kind, priority, available_at, concurrency_key, rate_key)
    SELECT workqueue_ready_slot(d.available_at), d.id, d.org_id, d.lane, d.kind, d.priority, d.available_at,
           d.concurrency_key, d.rate_key
      FROM due d;
    GET DIAGNOSTICS promoted = ROW_COUNT;

    WITH unringed AS (
        UPDATE workqueue_workitem w
           SET ringed_at = w.updated_at
         WHERE w.id = ANY(ARRAY(SELECT u.id FROM workqueue_workitem u
                                 WHERE u.status = 'pending'
                                   AND NOT (u.ringed_at = u.updated_at AND u.ringed_at IS NOT NULL)
                                 LIMIT batch FOR UPDATE SKIP LOCKED))
           AND w.status = 'pending' AND NOT (w.ringed_at = w.updated_at AND w.ringed_at IS NOT NULL)
        RETURNING w.*
    )
    INSERT INTO workqueue_ready (slot, id, org_id, lane, kind, priority, available_at, concurrency_key, rate_key)
    SELECT workqueue_ready_slot(u.available_at), u.id, u.org_id, u.lane, u.kind, u.priority, u.available_at,
           u.concurrency_key, u.rate_key
      FROM unringed u;
    GET DIAGNOSTICS adopted = ROW_COUNT;

    FOR s IN SELECT x::smallint FROM generate_series(1, 4) AS x WHERE x NOT IN (slot_now, slot_last) LOOP
        partition := 'workqueue_ready_' || s;
        size := pg_relation_size(partition::regclass);
        CONTINUE WHEN size = 0 OR size < min_bytes;
        EXECUTE format('SELECT count(*) FROM (SELECT FROM %I LIMIT %s) AS r', partition, max_rows + 1)
           INTO found_rows;
        IF found_rows > max_rows
           AND pg_stat_get_dead_tuples(partition::regclass) <= pg_stat_get_live_tuples(partition::regclass) THEN
            held := held + 1;
            CONTINUE;
        END IF;
        BEGIN
            EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', partition);
            EXECUTE format(
                'INSERT INTO workqueue_ready (slot, id, org_id, lane, kind, priority, available_at, concurrency_key,'
                ' rate_key)'
                ' SELECT workqueue_ready_slot(r.available_at), r.id, r.org_id, r.lane, r.kind, r.priority,'
                ' r.available_at, r.concurrency_key, r.rate_key'
                '   FROM %I r'
                '  WHERE EXISTS (SELECT FROM workqueue_workitem w WHERE w.id = r.id AND w.status = ''pending'')',
                partition);
            GET DIAGNOSTICS n = ROW_COUNT;
            EXECUTE format('TRUNCATE %I', partition);
            moved := moved + n;
            emptied := emptied + 1;
        EXCEPTION WHEN lock_not_available THEN
            held := held + 1;
        END;
    END LOOP;
END
$$;
