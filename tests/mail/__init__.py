"""Making a message: rendering, templates, headers, DKIM, VERP."""
