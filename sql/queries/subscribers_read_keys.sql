-- Every subscriber's address and the key its row holds (read once, by a migration).
SELECT email AS address, email_lower AS stored FROM einmal.subscribers
