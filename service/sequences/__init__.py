"""Sequences: mail that follows each member of a list from its confirmed join (docs/design.md#sequences).

`sequences` makes, lists, pauses and resumes them and says their status; `steps` adds, changes and deletes their
steps. The command line (`einmal sequence …`) and the API (`/api/v1/sequences…`) both call these; the sweep that
queues each member's next step is actors/sequencer.py.
"""
