-- Headers chosen per campaign: Reply-To, List-Id ('Name <id>' or 'id'), and extra headers
-- as a JSON array of [name, value] pairs (checked by service/headers.py).
ALTER TABLE einmal.campaigns
    ADD COLUMN reply_to text,
    ADD COLUMN list_id text,
    ADD COLUMN headers jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(headers) = 'array');
