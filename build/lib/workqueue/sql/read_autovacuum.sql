-- read_autovacuum: whether autovacuum reclaims the work item table's dead rows: the server's setting, and the table's own storage parameter if one turns it off
SELECT current_setting('autovacuum')::boolean
       AND COALESCE((SELECT o.option_value::boolean
                       FROM pg_class c, pg_options_to_table(c.reloptions) AS o
                      WHERE c.oid = 'workqueue_workitem'::regclass
                        AND o.option_name = 'autovacuum_enabled'), true)
