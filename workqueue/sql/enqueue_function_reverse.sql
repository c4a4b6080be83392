-- enqueue_function_reverse: undo enqueue_function.
DROP FUNCTION IF EXISTS workqueue_enqueue(
    uuid, uuid, text, text, jsonb, text, smallint, timestamptz, integer, uuid, uuid, text)
