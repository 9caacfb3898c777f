-- Whether a bulk campaign must carry a one-click unsubscribe (RFC 8058: List-Unsubscribe with an https link
-- and List-Unsubscribe-Post), which Gmail and Yahoo require of bulk senders. true (the default, and every
-- campaign made before): a node whose settings give none (EINMAL_UNSUBSCRIBE_URL and _SECRET) pauses it
-- instead of sending it, and `campaign create` and `approve` refuse it where they give none. false: the
-- operator created it with --no-unsubscribe (the API's "unsubscribe": false) and it may go out without one.
ALTER TABLE einmal.campaigns ADD COLUMN unsubscribe_required boolean NOT NULL DEFAULT true;
