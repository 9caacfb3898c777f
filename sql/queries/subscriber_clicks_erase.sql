-- Erasure of subscriber :subscriber_id: its clicks and opens go with the rest (service/subscribers/erasure.py)
WITH opened AS (DELETE FROM einmal.opens WHERE subscriber_id = :subscriber_id)
DELETE FROM einmal.clicks WHERE subscriber_id = :subscriber_id
