-- CAS draft -> approved
UPDATE einmal.campaigns SET status = 'approved', updated_at = now()
WHERE id = $1 AND status = 'draft'
RETURNING id
