/**
 * The owners of the tables, shared by the two one-owner tests (one-writer.test.ts: where the SQL
 * and Prisma writes are; statement-owners.test.ts: who runs the statements).
 */

/** Each table's owner: a file, or a folder (ending in `/`), relative to the repository root. */
export const OWNERS: Record<string, string> = {
  organizations: "services/admin-api/src/organizations.service.ts",
  worlds: "services/admin-api/src/worlds.service.ts",
  dashboard_sessions: "services/admin-api/src/dashboard-sessions.service.ts",
  api_keys: "packages/db/src/api-key-store.ts",
  webhook_endpoints: "packages/db/src/endpoints/",
  webhook_events: "packages/db/src/delivery-log/",
  webhook_event_keys: "packages/db/src/delivery-log/",
  webhook_deliveries: "packages/db/src/delivery-log/",
  delivery_states: "packages/db/src/delivery-log/",
  delivery_attempts: "packages/db/src/delivery-log/",
  // Written by the delivery log's statements, from the rows they change (delivery-log/stats.ts).
  endpoint_stats: "packages/db/src/delivery-log/",
  members: "packages/db/src/member-directory.ts",
  member_consents: "packages/db/src/member-directory.ts",
  member_deletions: "packages/db/src/member-directory.ts",
  delivery_recoveries: "packages/db/src/delivery-recoveries.ts",
  world_storage_usage: "packages/db/src/world-storage.ts",
};

/** SQL that writes `table` or one of its daily partitions. */
export function writesOfTable(table: string): RegExp {
  return new RegExp(`\\b(INSERT\\s+INTO|UPDATE|DELETE\\s+FROM|COPY|TRUNCATE(\\s+TABLE)?|MERGE\\s+INTO)\\s+(ONLY\\s+)?"?(public"?\\."?)?${table}(_p\\d{8})?\\b`, "i");
}
