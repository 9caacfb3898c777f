"""Engagement (docs/design.md#engagement): what a campaign's, a sequence step's and a message template's messages
met — delivered, bounced, complained, unsubscribed, and for tracked links their clicks, a person's and a
machine's — and a subscriber's last activity. The counts are kept as they happen (sql/migrations/0148_engagement.sql),
so each answer reads a few rows whatever the number of send rows.

    counts    a campaign's, a step's, a sequence's steps', a template's
    activity  a subscriber's last delivery, bounce, complaint, unsubscribe and click
"""
