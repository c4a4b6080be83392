-- claim_controls: the claim's controls, read once per claim (the one spelling for claim.sql and claim_oldest_first.sql, after their `running` CTE): each capped kind's room, the lane's paused kinds ('' for the whole lane), and allowed: the kinds the claim may take (not paused, below their cap) and the room the lane's cap leaves
kind_room AS (
    SELECT c.kind, c.cap - COALESCE((SELECT sum(r.items) FROM running r WHERE r.kind = c.kind), 0)
           AS room
      FROM unnest(%(capped_kinds)s::text[], %(kind_caps)s::integer[]) AS c(kind, cap)
), paused AS MATERIALIZED (
    SELECT COALESCE(array_agg(p.kind), '{}') AS kinds
      FROM workqueue_pause p
     WHERE p.lane = %(lane)s::text
), allowed AS MATERIALIZED (
    SELECT COALESCE(array_agg(k.kind), '{}') AS kinds,
           GREATEST(COALESCE(%(lane_cap)s::integer - (SELECT COALESCE(sum(items), 0) FROM running),
                             %(limit)s::integer), 0) AS room
      FROM unnest(%(kinds)s::text[]) AS k(kind), paused
     WHERE NOT ('' = ANY(paused.kinds) OR k.kind = ANY(paused.kinds))
       AND COALESCE((SELECT r.room FROM kind_room r WHERE r.kind = k.kind), 1) > 0
