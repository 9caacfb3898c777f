-- Send rows in doubt across every campaign (for /metrics).
SELECT count(*) FROM einmal.sends WHERE status = 'in_doubt'
