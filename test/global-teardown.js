// Stops what global-setup.js started: the embedded s3rver (and its temporary folder) and the
// run's database. Safe to call twice and after a partial setup.
import { dropDatabase } from "../scripts/lib/local-infra.mjs";

export default async function globalTeardown() {
  const s3 = globalThis.__VW_TEST_S3RVER__;
  globalThis.__VW_TEST_S3RVER__ = undefined;
  if (s3) await s3.stop();
  const db = globalThis.__VW_TEST_DB__;
  globalThis.__VW_TEST_DB__ = undefined;
  if (db) await dropDatabase(db.adminUrl, db.dbName);
}
