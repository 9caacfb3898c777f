-- A list's own confirmations' From (double opt-in): set with its sign-ups (`einmal lists form open --from`, PUT
-- /api/v1/lists/{name}/form), judged by its account's From rule then and when its sign-ups are opened. NULL: the
-- installation's EINMAL_OPTIN_FROM, the default of the lists given none, so that an installation of several
-- clients need not send every client's confirmations as one of them.
ALTER TABLE einmal.lists ADD COLUMN optin_from text CHECK (length(optin_from) <= 998);
