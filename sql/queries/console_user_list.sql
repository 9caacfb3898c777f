-- Every console user, by name, with its account's name and its sessions open now (by the limits given).
SELECT u.id, u.name, u.role, a.name AS account, u.created_at, u.password_changed_at,
       (SELECT count(*) FROM einmal.console_sessions s
        WHERE s.user_id = u.id AND s.seen_at > now() - make_interval(secs => :idle)
          AND s.created_at > now() - make_interval(secs => :lifetime)) AS sessions
FROM einmal.console_users AS u LEFT JOIN einmal.accounts AS a ON a.id = u.account_id
ORDER BY u.name_key
