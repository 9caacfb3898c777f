-- The unsubscribe page's settings of the account named $1: the display name $3 when $2, the language $4
-- when not NULL, the contact $6 when $5 (NULL clears a setting). No row when there is no such account.
UPDATE einmal.accounts
SET display_name = CASE WHEN $2::boolean THEN $3::text ELSE display_name END,
    language = coalesce($4::text, language),
    contact = CASE WHEN $5::boolean THEN $6::text ELSE contact END
WHERE name = $1
RETURNING display_name, language, contact
