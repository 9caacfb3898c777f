-- a campaign on every list of the bench account, already 'sending' (as after the start CAS)
INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status)
SELECT a.id, $1, 'Hello {{ name }}', 'news@example.com', 'Hi {{ name }}',
       (SELECT array_agg(id ORDER BY id) FROM einmal.lists WHERE account_id = a.id), 'sending'
FROM einmal.accounts a WHERE a.name = 'bench'
RETURNING id
