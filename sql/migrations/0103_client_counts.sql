-- What public clients did, counted per network and fixed window in PostgreSQL so that every node sees the
-- same count (docs/design.md#listening-surface "Bounds per client"): sign-ups of the hosted forms, failed API keys. A
-- client is its network (service/clients.py: an IPv4 address by its /24, an IPv6 one by its /64), so
-- rotating addresses inside one network counts as one client. Rows of windows past are removed by the pruner.
CREATE TABLE einmal.client_counts (
    kind          text NOT NULL,         -- what is counted: 'sign-up', 'key-failure', …
    client        text NOT NULL,         -- the client's network, e.g. 192.0.2.0/24 or 2001:db8:1:2::/64
    window_start  timestamptz NOT NULL,  -- the fixed window the hits fall in
    hits          integer NOT NULL,
    PRIMARY KEY (kind, client, window_start)
);
CREATE INDEX client_counts_window ON einmal.client_counts (window_start);
