/**
 * One way to PostgreSQL per process (docs/decisions/0012-one-database-path-per-process.md):
 * each service's sources open ONE pool (a `createPgPool`, or map-storage's one Prisma client, whose
 * pool it is), so DATABASE_POOL_MAX bounds the process; Prisma, where it stays, runs over that pool
 * (`createPrismaClientOnPool`); the only other connection is event-ingest's LISTEN (`createPgClient`,
 * to DIRECT_URL). Nothing outside packages/db (and the test infrastructure of packages/testing)
 * builds a `pg` pool or client of its own. The runtime side of the same rule (connections per
 * application_name under load) is each service's test/connection-budget.int.test.ts.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "@jest/globals";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "../../..");

interface Source {
  path: string;
  /** The text without comments (a factory named in a comment opens nothing). */
  code: string;
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (["node_modules", "dist", "generated"].includes(name)) return [];
    if (statSync(path).isDirectory()) return sources(path);
    return /\.(ts|tsx|mts|mjs|js)$/.test(name) && !/\.test(-helper)?\.tsx?$/.test(name) ? [path] : [];
  });
}

const withoutComments = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1");

function read(top: string, pkg: string): Source[] {
  const dir = join(root, top, pkg, "src");
  if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) return [];
  return sources(dir).map((file) => ({ path: relative(root, file).split("\\").join("/"), code: withoutComments(readFileSync(file, "utf8")) }));
}

const services = readdirSync(join(root, "services")).filter((name) => statSync(join(root, "services", name, "src"), { throwIfNoEntry: false })?.isDirectory());
const packages = readdirSync(join(root, "packages")).filter((name) => !["db", "testing"].includes(name));

const count = (files: readonly Source[], pattern: RegExp) => files.reduce((n, f) => n + [...f.code.matchAll(pattern)].length, 0);
const where = (files: readonly Source[], pattern: RegExp) => files.filter((f) => new RegExp(pattern.source).test(f.code)).map((f) => f.path);

/** What a service's sources may open; `listen`: a LISTEN connection to DIRECT_URL on top of the pool. */
const ALLOWED: Record<string, { listen: number; prisma: boolean }> = {
  "event-ingest": { listen: 1, prisma: false },
  "admin-api": { listen: 0, prisma: true },
  "delivery-worker": { listen: 0, prisma: false },
  "map-storage": { listen: 0, prisma: true },
};

/** Every breach of the rule by one service's sources. */
function breaches(service: string, files: readonly Source[]): string[] {
  const out: string[] = [];
  const allowed = ALLOWED[service] ?? { listen: 0, prisma: false };
  const pools = count(files, /\bcreatePgPool\s*\(/g) + count(files, /\bcreatePrismaClient\s*\(/g);
  if (pools !== 1) out.push(`${service} opens ${pools} pools (createPgPool / createPrismaClient), not one: ${where(files, /\bcreate(PgPool|PrismaClient)\s*\(/).join(", ")}`);
  const overPool = count(files, /\bcreatePrismaClientOnPool\s*\(/g);
  if (overPool > 1) out.push(`${service} builds ${overPool} Prisma clients over its pool`);
  if (!allowed.prisma && count(files, /\bcreatePrismaClient(OnPool)?\s*\(|\$queryRaw|\$executeRaw|\bprismaRunner\s*\(/g) > 0) {
    out.push(`${service} reaches PostgreSQL through Prisma beside its pool: ${where(files, /\bcreatePrismaClient(OnPool)?\s*\(|\$queryRaw|\$executeRaw|\bprismaRunner\s*\(/).join(", ")}`);
  }
  const listens = count(files, /\bcreatePgClient\s*\(/g);
  if (listens > allowed.listen) out.push(`${service} opens ${listens} dedicated connections (createPgClient), ${allowed.listen} allowed`);
  out.push(...strangers(files));
  return out;
}

/** `pg` used directly, outside the factories of packages/db. */
function strangers(files: readonly Source[]): string[] {
  return files.flatMap((f) => {
    const found: string[] = [];
    if (/from\s+["']pg["']|require\(\s*["']pg["']\s*\)|import\(\s*["']pg["']\s*\)/.test(f.code)) found.push(`${f.path} imports pg`);
    if (/new\s+(pg\.)?(Pool|Client)\s*\(/.test(f.code)) found.push(`${f.path} builds a pg Pool or Client`);
    return found;
  });
}

describe("one way to PostgreSQL per process", () => {
  it("reads every service's sources (the test sees what it checks)", () => {
    expect(services).toEqual(expect.arrayContaining(Object.keys(ALLOWED)));
    expect(read("services", "event-ingest").map((f) => f.path)).toContain("services/event-ingest/src/main.ts");
  });

  it.each(Object.keys(ALLOWED))("%s opens one pool, and nothing else but what it is allowed", (service) => {
    expect(breaches(service, read("services", service))).toEqual([]);
  });

  it("no other package builds a pg pool or client of its own", () => {
    expect(packages.flatMap((pkg) => strangers(read("packages", pkg)))).toEqual([]);
    expect(services.filter((s) => !(s in ALLOWED))).toEqual([]);
  });

  it("fails on a second path (a second pool, Prisma beside the pool, pg used directly)", () => {
    const main: Source = { path: "services/event-ingest/src/main.ts", code: "const pool = createPgPool(config.database, { max: 10 });\nconst listener = createPgClient(config.database);" };
    expect(breaches("event-ingest", [main])).toEqual([]);
    expect(breaches("event-ingest", [main, { path: "services/event-ingest/src/x.ts", code: "const hook = createPgPool(url, { max: 4 });" }])).toHaveLength(1);
    expect(breaches("event-ingest", [main, { path: "services/event-ingest/src/x.ts", code: "const prisma = createPrismaClient(url);" }]).length).toBeGreaterThan(0);
    expect(breaches("event-ingest", [main, { path: "services/event-ingest/src/x.ts", code: "await prisma.$queryRaw`SELECT 1`;" }])).toHaveLength(1);
    expect(breaches("event-ingest", [main, { path: "services/event-ingest/src/x.ts", code: 'import pg from "pg";\nconst p = new pg.Pool({});' }])).toHaveLength(2);
    expect(breaches("admin-api", [{ path: "a.ts", code: "const pool = createPgPool(s);\nconst c = createPgClient(s);" }])).toHaveLength(1);
    // A factory named in a comment opens nothing.
    expect(breaches("delivery-worker", [{ path: "a.ts", code: withoutComments("/** createPgPool(DATABASE_URL) */\nconst pool = createPgPool(s); // not createPgPool(x)") }])).toEqual([]);
  });
});
