-- history_v1_reverse: undo history_v1, after putting every row history holds back into its hot table.
DO $$
DECLARE
    kid record;
    cols text;
BEGIN
    FOR kid IN
        SELECT i.inhrelid::regclass AS child, i.inhparent::regclass AS parent
          FROM pg_inherits i
         WHERE i.inhparent IN (SELECT 'workqueue_workitem'::regclass
                               UNION ALL
                               SELECT to_regclass(quote_ident(f.relname)) FROM workqueue_history_follower f)
    LOOP
        cols := workqueue_history_columns_v1(kid.parent);
        EXECUTE format('WITH back AS (DELETE FROM %s RETURNING *) INSERT INTO %s (%s) SELECT %s FROM back',
                       kid.child, kid.parent, cols, cols);
        EXECUTE format('DROP TABLE %s', kid.child);
    END LOOP;
END
$$;
DROP FUNCTION workqueue_history_drop_v1(timestamptz);
DROP FUNCTION workqueue_history_move_v1(timestamptz, timestamptz, integer);
DROP FUNCTION workqueue_history_keep_v1(timestamptz, timestamptz, float8);
DROP FUNCTION workqueue_history_child_v1(regclass, name, text, text[]);
DROP FUNCTION workqueue_history_share_v1(regclass);
DROP FUNCTION workqueue_history_columns_v1(regclass);
DROP TABLE workqueue_history_follower;
DROP TABLE workqueue_history_span;
