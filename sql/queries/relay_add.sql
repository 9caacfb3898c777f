-- A new relay of the installation (service/accounts/shared_relays.py); no row: one of that name exists.
INSERT INTO einmal.relays (name, url, rate, quota_hour, quota_day)
VALUES (:relay_name, :url, :rate, :quota_hour, :quota_day)
ON CONFLICT (name) DO NOTHING
RETURNING id
