"""Transactional messages (docs/design.md#messages): one-off messages an application sends through
`POST /api/v1/messages` and `einmal message send`, each a campaign of kind 'message' with one send row."""
