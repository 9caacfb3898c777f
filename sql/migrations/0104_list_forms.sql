-- A list's public sign-up form is its account's choice (docs/design.md#api "Double opt-in"): closed until the
-- account opens it (`einmal lists form open`, PUT /api/v1/lists/{name}/form). The form is reached at
-- /forms/<form_token>, a random URL-safe token made when it is first opened and kept when it is closed and
-- opened again, so a list's sequential id finds no form. form_origins: the origins besides the serving
-- site's own whose pages may post the form (https://shop.example.org).
ALTER TABLE einmal.lists
    ADD COLUMN form_token text,
    ADD COLUMN form_open boolean NOT NULL DEFAULT false,
    ADD COLUMN form_origins text[] NOT NULL DEFAULT '{}';
CREATE UNIQUE INDEX lists_form_token ON einmal.lists (form_token) WHERE form_token IS NOT NULL;
