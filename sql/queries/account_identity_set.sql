-- Set account :account_id's return path and unsubscribe mailto where given (NULL clears), and its return-path
-- secret: :secret when given, else the one it has, else :generated once it has a return path.
UPDATE einmal.accounts
   SET return_path = CASE WHEN :return_path_given THEN :return_path::text ELSE return_path END,
       return_path_secret = coalesce(
           :secret::text,
           return_path_secret,
           CASE WHEN (CASE WHEN :return_path_given THEN :return_path::text ELSE return_path END) IS NOT NULL
                THEN :generated::text END),
       unsubscribe_mailto = CASE WHEN :mailto_given THEN :mailto::text ELSE unsubscribe_mailto END
 WHERE id = :account_id
