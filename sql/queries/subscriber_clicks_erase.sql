-- Erasure of subscriber :subscriber_id: its clicks go with the rest (service/subscribers/erasure.py)
DELETE FROM einmal.clicks WHERE subscriber_id = :subscriber_id
