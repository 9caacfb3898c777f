-- Of the list names :lists and campaign ids :campaigns a rule names, those account :account_id does not have.
SELECT array(SELECT n FROM unnest(:lists::text[]) AS n
             WHERE NOT EXISTS (SELECT 1 FROM einmal.lists AS l WHERE l.account_id = :account_id AND l.name = n))
           AS lists,
       array(SELECT i FROM unnest(:campaigns::bigint[]) AS i
             WHERE NOT EXISTS (SELECT 1 FROM einmal.campaigns AS c
                               WHERE c.account_id = :account_id AND c.id = i AND c.kind = 'campaign'))
           AS campaigns
