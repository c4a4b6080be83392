-- claim_contexts_orgs: what each claimed row (c) needs for its context under the orgs tenancy: whether its org is live, and its author's live role there (an author is a user's primary key as text: membership_actor_idx finds it); tenancy.modes.OrgsTenancy spells the same lookup for one pair
SELECT c.*,
       o.id IS NOT NULL AND o.gone_at IS NULL AS tenancy_live,
       m.role AS tenancy_role
  FROM claimed c
  LEFT JOIN workqueue_tenancy_org o ON o.id = c.org_id
  LEFT JOIN workqueue_tenancy_membership m
    ON m.org_id = c.org_id AND m.user_id::text = c.created_by AND m.ended_at IS NULL
