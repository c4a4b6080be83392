-- enqueue_many_rows: insert the rows given as parallel arrays (one per column, element n of each making row n) as pending items of the tenant the statement names (the insert shared by enqueue_many and enqueue_many_new, which add what follows it)
-- Every column and the value it gets, and the arrays, are made from workqueue/columns.py (the caller's columns as the arrays' elements, i, the rest as the queue stamps them).
INSERT INTO workqueue_workitem ({item_columns})
SELECT {item_values}
  FROM tenant, unnest({item_arrays}) AS i({given_columns})
