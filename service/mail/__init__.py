"""Making a message: templates, rendering, headers, DKIM, unsubscribe tokens and VERP; the From rule."""
