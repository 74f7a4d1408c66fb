-- Change notifications for the caches of world and endpoint settings (event-ingest's auth hook).
-- Every committed change a cache could hold stale sends NOTIFY on channel `vw_world_settings` with
-- the world's id, or `*` when an organization's slug changes (it is part of every world's address).
-- NOTIFY is transactional: it is delivered at commit, never for a rolled-back change, and
-- duplicates within a transaction are folded. Writes that no cache reads (the worker's
-- consecutive-failure counter, timestamps) send nothing, so the hot delivery path stays silent.

-- The body is an E'' string with every inner semicolon written \073: Prisma's migration runner
-- (driver adapter) splits a file at every semicolon, even inside quotes or $$.
CREATE FUNCTION vw_notify_world_settings() RETURNS trigger LANGUAGE plpgsql AS E'
BEGIN
  IF TG_TABLE_NAME = ''organizations'' THEN
    PERFORM pg_notify(''vw_world_settings'', ''*'')\073
  ELSIF TG_TABLE_NAME = ''worlds'' THEN
    PERFORM pg_notify(''vw_world_settings'', OLD.id::text)\073
  ELSE
    IF TG_OP <> ''INSERT'' THEN PERFORM pg_notify(''vw_world_settings'', OLD.world_id::text)\073 END IF\073
    IF TG_OP <> ''DELETE'' THEN PERFORM pg_notify(''vw_world_settings'', NEW.world_id::text)\073 END IF\073
  END IF\073
  RETURN NULL\073
END\073
';

CREATE TRIGGER webhook_endpoints_notify_change
  AFTER INSERT OR DELETE ON "webhook_endpoints"
  FOR EACH ROW EXECUTE FUNCTION vw_notify_world_settings();

CREATE TRIGGER webhook_endpoints_notify_update
  AFTER UPDATE ON "webhook_endpoints"
  FOR EACH ROW
  WHEN (OLD.world_id IS DISTINCT FROM NEW.world_id OR OLD.url IS DISTINCT FROM NEW.url
        OR OLD.subscriptions IS DISTINCT FROM NEW.subscriptions OR OLD.enabled IS DISTINCT FROM NEW.enabled
        OR OLD.format IS DISTINCT FROM NEW.format OR OLD.api_version IS DISTINCT FROM NEW.api_version
        OR OLD.secret_sealed IS DISTINCT FROM NEW.secret_sealed OR OLD.secret_version IS DISTINCT FROM NEW.secret_version
        OR OLD.created_at IS DISTINCT FROM NEW.created_at)
  EXECUTE FUNCTION vw_notify_world_settings();

CREATE TRIGGER worlds_notify_change
  AFTER DELETE ON "worlds"
  FOR EACH ROW EXECUTE FUNCTION vw_notify_world_settings();

CREATE TRIGGER worlds_notify_update
  AFTER UPDATE ON "worlds"
  FOR EACH ROW
  WHEN (OLD.slug IS DISTINCT FROM NEW.slug OR OLD.organization_id IS DISTINCT FROM NEW.organization_id
        OR OLD.custom_domain IS DISTINCT FROM NEW.custom_domain OR OLD.identity_providers IS DISTINCT FROM NEW.identity_providers
        OR OLD.analytics IS DISTINCT FROM NEW.analytics)
  EXECUTE FUNCTION vw_notify_world_settings();

-- Deleting an organization deletes its worlds (cascade), whose trigger names each of them.
CREATE TRIGGER organizations_notify_change
  AFTER UPDATE OF slug ON "organizations"
  FOR EACH ROW EXECUTE FUNCTION vw_notify_world_settings();
