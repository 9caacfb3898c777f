-- The settings of the account :account_id: the display name :display_name when :display_name_given, the language :language
-- when not NULL, the contact :contact when :contact_given (NULL clears a setting), the time zone :time_zone when not NULL.
-- No row when there is no such account.
UPDATE einmal.accounts
SET display_name = CASE WHEN :display_name_given::boolean THEN :display_name::text ELSE display_name END,
    language = coalesce(:language::text, language),
    contact = CASE WHEN :contact_given::boolean THEN :contact::text ELSE contact END,
    time_zone = coalesce(:time_zone::text, time_zone)
WHERE id = :account_id
RETURNING name, display_name, language, contact, time_zone
