"""The operator's console under /console (docs/guide/console.md): server-rendered pages for people, over the
same service functions the API calls; no SQL of its own. app.py holds the routes, guard.py who may use them
(sessions, forms' tokens, the sign-in's bound), render.py the templates and the headers every answer has."""
