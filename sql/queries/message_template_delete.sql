-- account :account_id's message template :template_name removed (messages made from it keep their copy)
DELETE FROM einmal.message_templates WHERE account_id = :account_id AND name = :template_name RETURNING name
