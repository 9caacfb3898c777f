-- The From addresses the account's campaigns were made with, and its return path: the domains the doctor
-- checks for it besides its own (at most :limit addresses, the newest campaigns first).
SELECT addresses.address
FROM (
    SELECT from_address AS address, max(id) AS newest
    FROM einmal.campaigns
    WHERE account_id = :account_id
    GROUP BY from_address
    ORDER BY newest DESC
    LIMIT :limit
) AS addresses
