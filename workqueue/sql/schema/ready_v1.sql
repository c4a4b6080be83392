-- ready_v1: the ready ring (workqueue/models/ready.py): one row per pending item, in a partition the rotation empties with TRUNCATE (which, unlike VACUUM, does not wait for the oldest snapshot), so the claim walks past what a few seconds of claims leave, never what a held horizon keeps
-- Slot 0 holds the items due later than the ring's reach; slots 1 to 4 the rest, by the second (of the database's
-- clock) their row was written in. The rotation (workqueue_rotate_ready_v1) moves what a slot of neither this second
-- nor the last still holds into this second's (or slot 0) and empties it.
CREATE TABLE workqueue_ready (
    slot smallint NOT NULL,
    id uuid NOT NULL,
    org_id uuid NOT NULL,
    lane varchar(50) NOT NULL,
    kind varchar(100) NOT NULL,
    priority smallint NOT NULL,
    available_at timestamptz NOT NULL,
    concurrency_key varchar(200),
    rate_key varchar(200)
) PARTITION BY LIST (slot);
CREATE TABLE workqueue_ready_later PARTITION OF workqueue_ready FOR VALUES IN (0);
CREATE TABLE workqueue_ready_1 PARTITION OF workqueue_ready FOR VALUES IN (1);
CREATE TABLE workqueue_ready_2 PARTITION OF workqueue_ready FOR VALUES IN (2);
CREATE TABLE workqueue_ready_3 PARTITION OF workqueue_ready FOR VALUES IN (3);
CREATE TABLE workqueue_ready_4 PARTITION OF workqueue_ready FOR VALUES IN (4);
-- The fair claim: per lane, the tenants with pending work (a loose index scan), then each tenant's items by priority
-- and age; the claim across tenants (fairness off, the woken claim, the fair claim's fallback) by priority and age;
-- the first waiting item of a concurrency key; and the later items by when they come due (their promotion). No key
-- of its own: a row is found by what it is ordered by (lane, tenant, priority, due, then its id), which the fair
-- index holds, so an enqueue writes two index entries here and one (the item's key) on the item.
CREATE INDEX workqueue_ready_fair_idx ON workqueue_ready (lane, org_id, priority DESC, available_at);
-- The index across tenants holds every row (a smallint is never below -32768), but only a statement that says so may
-- read it: a tenant's pick never can, whatever a slot's statistics say (a slot emptied a moment ago has none, and a
-- plan made then would walk the lane's whole backlog to reach one tenant's items).
CREATE INDEX workqueue_ready_claim_idx ON workqueue_ready (lane, priority DESC, available_at)
    WHERE priority >= -32768;
CREATE INDEX workqueue_ready_key_idx ON workqueue_ready (org_id, concurrency_key, priority DESC, available_at, id)
    WHERE concurrency_key IS NOT NULL;
CREATE INDEX workqueue_ready_later_due_idx ON workqueue_ready_later (available_at);
-- Tenants are many (as on the items: migration 0002), so a tenant's rows are read from its own index whatever one
-- sample of a partition saw.
ALTER TABLE workqueue_ready_1 ALTER COLUMN org_id SET (n_distinct = -0.01);
ALTER TABLE workqueue_ready_2 ALTER COLUMN org_id SET (n_distinct = -0.01);
ALTER TABLE workqueue_ready_3 ALTER COLUMN org_id SET (n_distinct = -0.01);
ALTER TABLE workqueue_ready_4 ALTER COLUMN org_id SET (n_distinct = -0.01);

-- How far ahead the ring takes an item: one due later waits in slot 0 until the rotation promotes it.
CREATE FUNCTION workqueue_ready_reach() RETURNS interval LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT interval '10 seconds' $$;

-- The slot a ready row written now takes for an item due at `at`: slot 0 when it is due beyond the ring's reach,
-- else this second's slot of the ring. Inlined where it is called (one SQL expression, STABLE).
CREATE FUNCTION workqueue_ready_slot(at timestamptz) RETURNS smallint LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN at > now() + workqueue_ready_reach() THEN 0::smallint
                ELSE (1 + mod(floor(extract(epoch FROM now()))::bigint, 4))::smallint END
$$;

-- Forget the ready rows of the given items that are no longer pending (a cancel, a discard ended them while they
-- waited): the everyday login may insert ready rows but not delete them, since DELETE would let it LOCK the ring in a
-- mode that stalls every claim. Whoever calls it, it deletes only rows no item needs (an item still pending keeps its
-- row), and passes over a row a claim holds (that claim deletes it). Run after the caller's own change to the items
-- (a VOLATILE function's statement sees it).
CREATE FUNCTION workqueue_ready_forget(ids uuid[]) RETURNS integer LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, public
    AS $$
    WITH gone AS (
        DELETE FROM workqueue_ready r
         USING (SELECT x.slot, x.lane, x.org_id, x.priority, x.available_at, x.id
                  FROM workqueue_workitem w
                  JOIN workqueue_ready x
                    ON x.lane = w.lane AND x.org_id = w.org_id AND x.priority = w.priority
                   AND x.available_at = w.available_at AND x.id = w.id
                 WHERE w.id = ANY(ids) AND w.status <> 'pending'
                   FOR UPDATE OF x SKIP LOCKED) AS k
         WHERE r.slot = k.slot AND r.lane = k.lane AND r.org_id = k.org_id AND r.priority = k.priority
           AND r.available_at = k.available_at AND r.id = k.id
        RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;

-- One rotation of the ring, by one rotator at a time (the mutex row `workqueue.ready`; another's turn returns at
-- once): promote the later items now within reach; give a ready row to each pending item that has none (written by
-- a release before the ring, or at the upgrade: its ringed_at is not its updated_at; spelled as the
-- partial index workitem_unringed_idx says it, so the planner reads that index); then empty each ring slot of
-- neither this second nor the last whose file has grown to min_bytes, moving what it still holds (pending items
-- only) into this second's slot or slot 0 first, unless it holds more than max_rows (a backlog: emptying it would
-- rewrite the backlog; it waits for a later turn). A slot another transaction holds a lock on past lock_timeout_ms
-- (a long report reading it, a pg_dump) is left for the next turn. Returns what it did.
CREATE FUNCTION workqueue_rotate_ready_v1(min_bytes bigint, max_rows integer, batch integer, lock_timeout_ms integer,
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
        IF found_rows > max_rows THEN
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

INSERT INTO workqueue_mutex (name) VALUES ('workqueue.ready') ON CONFLICT DO NOTHING;
