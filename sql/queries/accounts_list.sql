-- Every account, by name, with when it was created and how many subscribers it has (not the erased).
SELECT a.name, a.created_at,
       (SELECT count(*) FROM einmal.subscribers s WHERE s.account_id = a.id AND s.status <> 'erased') AS subscribers
FROM einmal.accounts AS a
ORDER BY a.name
