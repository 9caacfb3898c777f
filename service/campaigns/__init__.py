"""The campaign, einmal's central noun: what the command line and the HTTP API both do to one.

    fields       the checks of what a draft is made of: names, subject, addresses, bodies, lists
    drafts       create a draft, change one while it is a draft
    transitions  approve, pause, resume, cancel: one compare-and-set and its NOTIFY
    approval     approve, after its checks (the one-click unsubscribe, the trial render)
    preview      the message one subscriber would get; the trial render; a test message
    rows         failed rows queued again (retry); in-doubt rows listed and decided (reconcile)
    status       a campaign's counts and what it waits for
    listing      the campaigns, all or an account's
    self_pause   a campaign that is being refused or complained about pauses itself
    retention    a finished campaign's send rows go, what they came to stays

Functions take the connection, then keyword arguments; they return dataclasses and raise the errors of
service/errors.py (NotFound, Invalid, Conflict). Nothing here prints.
"""
