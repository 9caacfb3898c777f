-- Erasure of subscriber :subscriber_id: its progress in every sequence goes with the rest (service/subscribers/erasure.py)
DELETE FROM einmal.sequence_members WHERE subscriber_id = :subscriber_id
