/**
 * Every write of the delivery log goes through this folder: no other source file of the
 * workspace inserts, updates or deletes rows of `webhook_events`, `webhook_deliveries` or
 * `delivery_attempts`, in SQL or through Prisma's model methods. (Tests may seed rows.)
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "@jest/globals";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "../../../..");

const WRITES = [
  /\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+"?(webhook_events|webhook_deliveries|delivery_attempts)\b/i,
  /\.(webhookEvent|webhookDelivery|deliveryAttempt)\.(create|createMany|update|updateMany|upsert|delete|deleteMany)\(/,
];

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (["node_modules", "dist", "generated", "test"].includes(name)) return [];
    if (statSync(path).isDirectory()) return sources(path);
    return /\.(ts|tsx|mjs|js)$/.test(name) && !/\.test\.ts$/.test(name) ? [path] : [];
  });
}

it("leaves the delivery-log tables' writes to packages/db/src/delivery-log alone", () => {
  const offenders = ["services", "packages"]
    .flatMap((top) => readdirSync(join(root, top)).map((pkg) => join(root, top, pkg, "src")))
    .filter((src) => statSync(src, { throwIfNoEntry: false })?.isDirectory())
    .flatMap(sources)
    .filter((file) => !file.startsWith(here))
    .flatMap((file) => {
      const text = readFileSync(file, "utf8");
      return WRITES.some((re) => re.test(text)) ? [relative(root, file)] : [];
    });
  expect(offenders).toEqual([]);
});
