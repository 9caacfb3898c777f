-- The checks 0100 added NOT VALID, validated without blocking writes (SHARE UPDATE EXCLUSIVE).
ALTER TABLE einmal.list_members VALIDATE CONSTRAINT list_members_state;
ALTER TABLE einmal.campaigns VALIDATE CONSTRAINT campaigns_kind;
