-- publish: a notification row's payload on the channel its kind names (delivered when the relay commits)
SELECT pg_notify(%(channel)s::text, %(message)s::text)
