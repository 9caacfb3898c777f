-- wake every node's sweep: sequence :sequence_id has members to look at (a hint; the sweep's tick finds them anyway)
SELECT pg_notify('einmal_sequence', :sequence_id::bigint::text)
