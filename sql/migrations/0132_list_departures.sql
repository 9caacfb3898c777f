-- Who left which list (docs/guide/importing.md). Leaving a list deletes the membership (preference_leave.sql),
-- so nothing else remembers it; an import of an older file, in which the person was still on the list, would put
-- them back. A departure is kept per list and mailbox key, by the preference page's leave and by an import whose
-- source says the person left the list (listmonk's `unsubscribed`), and an import puts no one on a list they
-- left (list_members_insert_staged.sql). A membership that exists again (a new sign-up, the API's PUT) is not
-- touched by it: an import leaves every existing membership as it is. Like a suppression, a departure outlives
-- the erasure of its subscriber: it holds only the mailbox key.
CREATE TABLE einmal.list_departures (
    list_id     bigint NOT NULL REFERENCES einmal.lists (id),
    email_lower text NOT NULL,
    left_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (list_id, email_lower)
);
