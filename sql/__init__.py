"""einmal's SQL: migrations/NNNN_name.sql and queries/<entity>_<verb>.sql."""
