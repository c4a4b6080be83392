-- read_throughput: items completed in each of the last `minutes` whole minutes and the current one (by the database clock), oldest first, in every tenant the login sees (each minute is a range read of workitem_finished_idx)
SELECT m.minute, count(w.id)
  FROM generate_series(date_trunc('minute', now()) - make_interval(mins => %(minutes)s::integer - 1),
                       date_trunc('minute', now()), interval '1 minute') AS m(minute)
  LEFT JOIN workqueue_workitem w
    ON w.status = 'done' AND w.updated_at >= m.minute AND w.updated_at < m.minute + interval '1 minute'
 GROUP BY m.minute
 ORDER BY m.minute
