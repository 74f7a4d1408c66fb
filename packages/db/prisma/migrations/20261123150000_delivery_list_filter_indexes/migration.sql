-- The history list filters on status and type find their rows through an index each, newest first,
-- instead of walking the whole history of the endpoint in time order and discarding what does not
-- match (seconds for an endpoint with a million deliveries when the status or type is rare or absent).
-- On a partitioned table each statement builds the index on every partition, blocking writes while
-- it does. On a large existing history, build them beforehand without blocking (see Upgrading in
-- packages/db/README.md), and IF NOT EXISTS then leaves them as they are.
CREATE INDEX IF NOT EXISTS "webhook_deliveries_endpoint_id_status_created_at_id_idx" ON "webhook_deliveries"("endpoint_id", "status", "created_at" DESC, "id" DESC);
CREATE INDEX IF NOT EXISTS "webhook_deliveries_endpoint_id_type_created_at_id_idx" ON "webhook_deliveries"("endpoint_id", "type", "created_at" DESC, "id" DESC);
