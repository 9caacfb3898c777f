"""The command line, run as the operator runs it."""
