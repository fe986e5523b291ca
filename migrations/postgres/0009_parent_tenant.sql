-- colikv's PostgreSQL schema 9: a conversation's parent (a fork's source) is
-- a conversation of its own tenant (docs/postgres.md, "What tenants share").
--
-- The foreign key on parent_id is checked by the server as the tables'
-- owner, past row-level security: a tenant's role that wrote a row of its
-- own naming any conversation id as its parent learnt from the key's error
-- whether that id was another tenant's conversation, and with the row it
-- held the key's lock on that conversation, so that the other tenant's rm
-- of it waited for the role's transaction. This trigger refuses a parent
-- that is not of the row's tenant first, with one message whether the id is
-- another tenant's or nobody's. It runs as the writer, whose policy shows it
-- its own tenants' rows only; the table is named by the trigger's schema, not
-- found on the writer's search path (where a temporary table could stand in).
-- A library of PostgreSQL schema 8 refuses this store. It may run again over
-- its own result (a store whose version was set back by hand).
CREATE OR REPLACE FUNCTION colikv_parent_of_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  found boolean;
BEGIN
  EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.conversations WHERE conversation_id = $1 AND tenant_id = $2)',
                 TG_TABLE_SCHEMA)
    INTO found USING NEW.parent_id, NEW.tenant_id;
  IF NOT found THEN
    RAISE EXCEPTION 'a conversation''s parent must be a conversation of its tenant'
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS conversations_parent_of_tenant ON conversations;
CREATE TRIGGER conversations_parent_of_tenant BEFORE INSERT OR UPDATE OF parent_id, tenant_id ON conversations
  FOR EACH ROW WHEN (NEW.parent_id IS NOT NULL) EXECUTE FUNCTION colikv_parent_of_tenant();
