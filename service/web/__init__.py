"""The HTTP surface: the Starlette app and its pages (docs/design.md#listening-surface)."""
