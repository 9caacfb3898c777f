"""Segments: an account's saved, named rules over its subscribers (docs/guide/segments.md).

`rules` reads a rule's typed JSON and compiles it to a parameterised SQL predicate; `compiled` puts that
predicate into a query (the recipient build, a count, a sample); `segments` makes, lists, shows, changes,
deletes, counts and samples them. The command line (`einmal segments …`) and the API (`/api/v1/segments…`)
both call these.
"""
