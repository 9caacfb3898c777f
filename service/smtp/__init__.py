"""Speaking SMTP: the client connection, its wire, the capture server of the demo, and why a message failed
(reasons: a reply's or a bounce's reason)."""
