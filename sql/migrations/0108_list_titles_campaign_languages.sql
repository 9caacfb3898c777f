-- What the public pages say (docs/design.md#listening-surface, #api). A list's title is what subscribers read (the sign-up
-- form, the confirmation page, the preference page); its name stays the operator's key. NULL: the pages use
-- a neutral wording, never the name.
ALTER TABLE einmal.lists
    ADD COLUMN title text CHECK (title <> '');

-- A confirmation campaign's wording ('en-2': its language and einmal's version of the text), made with it
-- and recorded by each sign-up it sends to (list_members.wording). The ones made before are version 1; one
-- made before confirmations had languages is English.
ALTER TABLE einmal.campaigns
    ADD COLUMN wording text;
UPDATE einmal.campaigns SET wording = coalesce(language, 'en') || '-1' WHERE kind = 'confirmation';

-- A campaign's unsubscribe page speaks the language its message was sent in: campaign_create.sql records
-- the account's language when none is given, and the campaigns made before take their account's now, so that
-- a later change of the account's language leaves the pages of mail already sent as they were.
UPDATE einmal.campaigns AS c
SET language = CASE WHEN c.kind = 'confirmation' THEN 'en' ELSE a.language END
FROM einmal.accounts AS a
WHERE a.id = c.account_id AND c.language IS NULL;
