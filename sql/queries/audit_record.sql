-- One line of the audit log: :actor did :action to :subject, in account :account_id (NULL: the installation).
INSERT INTO einmal.audit_log (actor, account_id, action, subject)
VALUES (:actor, :account_id, :action, :subject)
RETURNING id
