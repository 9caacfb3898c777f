"""Speaking SMTP: the client connection, its wire, and the capture server of the demo."""
