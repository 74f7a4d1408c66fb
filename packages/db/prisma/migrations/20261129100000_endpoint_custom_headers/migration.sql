-- Custom headers of an endpoint (sent with every delivery and Test). The whole set is one JSON
-- object sealed by the secret box of @vw/webhook-core (SECRETS_ENCRYPTION_KEY), like the secret,
-- so a PATCH replaces or clears it in one write, and NULL when the endpoint has none. The names are
-- kept apart in clear for reads, which never show a value. Both columns are added without a
-- rewrite of the table (NULL, and a constant default).
ALTER TABLE "webhook_endpoints" ADD COLUMN "headers_sealed" TEXT;
ALTER TABLE "webhook_endpoints" ADD COLUMN "header_names" TEXT[] DEFAULT ARRAY[]::TEXT[];

-- event-ingest caches each world's auth endpoints (headers included) while it is told of every
-- change, so a change of the headers must notify as a change of the secret does.
DROP TRIGGER webhook_endpoints_notify_update ON "webhook_endpoints";
CREATE TRIGGER webhook_endpoints_notify_update
  AFTER UPDATE ON "webhook_endpoints"
  FOR EACH ROW
  WHEN (OLD.world_id IS DISTINCT FROM NEW.world_id OR OLD.url IS DISTINCT FROM NEW.url
        OR OLD.subscriptions IS DISTINCT FROM NEW.subscriptions OR OLD.enabled IS DISTINCT FROM NEW.enabled
        OR OLD.format IS DISTINCT FROM NEW.format OR OLD.api_version IS DISTINCT FROM NEW.api_version
        OR OLD.secret_sealed IS DISTINCT FROM NEW.secret_sealed OR OLD.secret_version IS DISTINCT FROM NEW.secret_version
        OR OLD.headers_sealed IS DISTINCT FROM NEW.headers_sealed
        OR OLD.created_at IS DISTINCT FROM NEW.created_at)
  EXECUTE FUNCTION vw_notify_world_settings();
