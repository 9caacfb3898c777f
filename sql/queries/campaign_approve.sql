-- CAS draft -> approved
UPDATE einmal.campaigns SET status = 'approved', updated_at = now()
WHERE id = :campaign_id AND status = 'draft'
RETURNING id
