-- What the unsubscribe page shows a subscriber (service/web/pages.py): the name the account goes by
-- (NULL: the From name of the message), the language of its pages (a campaign's own, when set, comes
-- first) and an address to write to when a link does not work. A language is a code such as en, de or
-- pt-BR; which ones have texts is einmal's (service/web/languages/), not the database's, to decide.
ALTER TABLE einmal.accounts
    ADD COLUMN display_name text CHECK (display_name <> ''),
    ADD COLUMN language text NOT NULL DEFAULT 'en' CHECK (language ~ '^[a-z]{2,3}(-[A-Za-z0-9]{1,8})*$'),
    ADD COLUMN contact text CHECK (contact <> '');
ALTER TABLE einmal.campaigns
    ADD COLUMN language text CHECK (language ~ '^[a-z]{2,3}(-[A-Za-z0-9]{1,8})*$');
