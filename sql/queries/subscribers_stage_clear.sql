-- Empty the staging table before the next chunk.
TRUNCATE pg_temp.einmal_import
