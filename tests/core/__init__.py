"""Settings, the database and its migrations, the supervisor, addresses, and the layer rule."""
