-- A From domain is one account's (docs/design.md#accounts): a domain given to an account, and every domain under
-- it, may be given to no other account. The trigger judges each new or renamed row under one transaction-scoped
-- advisory lock, so two accounts given overlapping domains at once are judged one after the other (each of its
-- statements reads what the other committed). Rows already there are kept: an installation that gave two
-- accounts overlapping domains before this keeps them, `einmal doctor` names them, and each such account sends
-- from its own domains as before (service/mail/from_rule.py).
CREATE INDEX account_domains_domain ON einmal.account_domains (domain);

CREATE FUNCTION einmal.account_domain_reserved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('einmal.account_domains'));
    IF EXISTS (
        SELECT 1 FROM einmal.account_domains d
         WHERE d.account_id <> NEW.account_id
           AND (d.domain = NEW.domain
                OR right(NEW.domain, length(d.domain) + 1) = '.' || d.domain
                OR right(d.domain, length(NEW.domain) + 1) = '.' || NEW.domain)
    ) THEN
        RAISE EXCEPTION 'the domain % overlaps another account''s', NEW.domain
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'account_domains_reserved';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER account_domains_reserved BEFORE INSERT OR UPDATE OF domain, account_id ON einmal.account_domains
    FOR EACH ROW EXECUTE FUNCTION einmal.account_domain_reserved();
