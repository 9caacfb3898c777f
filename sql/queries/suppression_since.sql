-- what a lost notification could have carried
SELECT account_id, email_lower, reason FROM einmal.suppressions WHERE created_at >= :since
