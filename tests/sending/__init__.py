"""The exactly-once pipeline end to end: build, claim, send, record; policy and budget."""
