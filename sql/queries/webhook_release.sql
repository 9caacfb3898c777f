-- A delivery actor that stops gives back the leases of token :token still in flight: due again at once, for
-- any node, rather than when their leases would end. (A delivery given back may have reached its receiver:
-- it goes again, with the same id.)
UPDATE einmal.webhook_deliveries SET claimed_by = NULL, lease_until = NULL
WHERE claimed_by = :token AND state = 'pending'
