-- Erasure of subscriber :subscriber_id: its clicks, its opens and its last activity go with the rest
-- (service/subscribers/erasure.py)
WITH deliveries AS (
    DELETE FROM einmal.subscriber_deliveries WHERE subscriber_id = :subscriber_id
), activity AS (
    DELETE FROM einmal.subscriber_activity WHERE subscriber_id = :subscriber_id
), opened AS (
    DELETE FROM einmal.opens WHERE subscriber_id = :subscriber_id
)
DELETE FROM einmal.clicks WHERE subscriber_id = :subscriber_id
