"""The accounts and their API keys, for the command line and the HTTP API.

account   find one by name, list them, what its unsubscribe page shows (`einmal accounts set`, /account)
keys      API keys: minted, listed, revoked, and the lookup a request's Bearer key goes through
"""
