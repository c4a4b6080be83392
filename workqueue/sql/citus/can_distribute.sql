-- can_distribute: whether this database has Citus, and how many history span tables hang under the item table (Citus distributes no table with inheritance children)
SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus'),
       (SELECT count(*) FROM pg_inherits WHERE inhparent = 'workqueue_workitem'::regclass)
