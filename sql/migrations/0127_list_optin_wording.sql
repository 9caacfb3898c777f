-- A list's own confirmation subject and text (double opt-in): templates as a campaign's, set with its sign-ups
-- (`einmal lists form open --subject --text-file`, PUT /api/v1/lists/{name}/form), checked in the sandbox then,
-- the text refused unless it shows {{ confirm_url }}. NULL: einmal's own in the account's language
-- (service/subscribers/languages/<code>.toml), the default of the lists given none.
ALTER TABLE einmal.lists
    ADD COLUMN optin_subject text CHECK (length(optin_subject) <= 200),
    ADD COLUMN optin_text text CHECK (length(optin_text) <= 10000);
