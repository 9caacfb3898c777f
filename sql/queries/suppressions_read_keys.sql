-- Every suppression's key as stored (read once, by a migration).
SELECT email_lower AS address, email_lower AS stored FROM einmal.suppressions
