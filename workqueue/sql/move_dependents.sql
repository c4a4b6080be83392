-- move_dependents: move the waiting children of the items the including statement ended or requeued (its `parent_items`: id, has_dependents) by the edges that change met (or, requeued, unmet), as workqueue_move_dependents_v3 does (sql/schema/, migration 0020: a child it makes pending gets its ready row); only items that are some item's parent, and not at all when none is, so a plain item costs nothing more; the one spelling of what ending or requeuing an item does to the items that wait for it
-- The aggregate reads every row of `parent_items` first: the function runs once the including statement has locked and
-- changed them all (it sees those changes, and, in its own snapshot, edges declared while it waited for their locks).
dependents AS (
    SELECT workqueue_move_dependents_v3(array_agg(p.id), {needs}, {delta}) AS made_pending
      FROM parent_items AS p
     WHERE p.has_dependents
    HAVING count(*) > 0
)
