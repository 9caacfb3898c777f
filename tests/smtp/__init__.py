"""The SMTP client against real SMTP servers, several relays, the capture server."""
