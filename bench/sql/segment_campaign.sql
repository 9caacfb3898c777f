-- a campaign on list 'one' of the bench account narrowed by the segment rule $1, already 'sending'
INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status, started_at,
                              segment, segment_rule)
SELECT a.id, 'segment', 'Hello {{ name }}', 'news@example.com', 'Hi {{ name }}',
       ARRAY(SELECT id FROM einmal.lists WHERE account_id = a.id AND name = 'one'), 'sending', now(),
       'bench', $1::jsonb
FROM einmal.accounts a WHERE a.name = 'bench'
RETURNING id
