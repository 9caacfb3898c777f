-- The pruners' turn (actors/pruner.py): one node's at a time, held by its session until its connection ends
SELECT pg_try_advisory_lock(1701408366, 0)
