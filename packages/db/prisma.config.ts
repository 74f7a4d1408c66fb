/**
 * Prisma CLI configuration (generate, migrate). Prisma 6.19 runs here without native engines:
 * the schema engine is the WASM build shipped in the `prisma` package, and it reaches PostgreSQL
 * through @prisma/adapter-pg. That path has known defects, each worked around below.
 * This file is loaded by the CLI only; the application builds its client in src/client.ts.
 */
import path from "node:path";
import { defineConfig } from "prisma/config";
import { PrismaPg } from "@prisma/adapter-pg";
import type pg from "pg";
import { CatalogTolerantClient, connectionFieldsFromUrl } from "./src/pg-compat.js";

/**
 * Defect 1 (a known Prisma defect): every migrate command fails with "Column type 'name' could
 * not be deserialized": the adapter knows neither `name`/`"char"` columns nor their arrays, which
 * migrate reads from the catalogs. CatalogTolerantClient reads them as text (see src/pg-compat.ts;
 * the runtime client uses it too, for raw catalog queries).
 *
 * Defect 2: the adapter creates its shadow database by copying the pool config and setting
 * `database`; a `connectionString` wins over that field, so the "shadow" is the real database and
 * the second `migrate dev` fails with P3006. Hence separate fields parsed from DATABASE_URL.
 *
 * Defect 3, part 1: idle pooled connections would hold the process open for pg's default 10 s.
 */
function poolConfig(databaseUrl: string): pg.PoolConfig {
  return { ...connectionFieldsFromUrl(databaseUrl), Client: CatalogTolerantClient, idleTimeoutMillis: 100, max: 4 };
}

/**
 * Defect 3, part 2: the WASM engine leaves 10 s and 60 s timers running after a command has
 * finished, so the CLI takes 10-60 s to exit. Timers of 10 s and more are unref'd in this (CLI)
 * process: they still fire while the command runs, but no longer keep a finished command alive.
 */
const LONG_TIMER_MS = 10_000;
const originalSetTimeout = globalThis.setTimeout;
const originalSetInterval = globalThis.setInterval;
function unrefIfLong<T>(timer: T, ms: unknown): T {
  if (typeof ms === "number" && ms >= LONG_TIMER_MS) (timer as { unref?: () => void }).unref?.();
  return timer;
}
globalThis.setTimeout = Object.assign(
  (fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => unrefIfLong(originalSetTimeout(fn, ms, ...args), ms),
  originalSetTimeout,
) as typeof setTimeout;
globalThis.setInterval = Object.assign(
  (fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => unrefIfLong(originalSetInterval(fn, ms, ...args), ms),
  originalSetInterval,
) as typeof setInterval;

/**
 * Migrations go to DIRECT_URL (PostgreSQL itself) when it is set: DATABASE_URL may point at a
 * transaction-pooling PgBouncer (`?pgbouncer=true`), through which migrate's session (its advisory
 * lock, its prepared statements) would not hold. Without DIRECT_URL, DATABASE_URL serves, minus
 * that flag, which is Prisma's convention and not a libpq parameter.
 */
function migrationUrl(): string | undefined {
  const raw = process.env.DIRECT_URL?.trim() || process.env.DATABASE_URL?.trim() || undefined;
  if (!raw) return undefined;
  try {
    const url = new URL(raw);
    url.searchParams.delete("pgbouncer");
    return url.toString();
  } catch {
    return raw; // malformed: pg names the problem when migrate connects
  }
}

/**
 * Defect 4: `prisma generate` never connects, yet with DATABASE_URL unset it goes looking for a
 * native query engine to download (and fails offline). The URL given to the CLI is read here,
 * before a placeholder is put in its place for the schema's `env("DATABASE_URL")`; migrate
 * commands use the real one and refuse to run without it.
 */
const databaseUrl = migrationUrl();
if (!process.env.DATABASE_URL?.trim()) process.env.DATABASE_URL = databaseUrl ?? "postgresql://unset@invalid.localhost:5432/unset";

export default defineConfig({
  schema: path.join("prisma", "schema.prisma"),
  migrations: { path: path.join("prisma", "migrations") },
  experimental: { adapter: true },
  engine: "js",
  async adapter() {
    if (!databaseUrl) throw new Error("DATABASE_URL (or DIRECT_URL) is required (postgresql://user:password@host:5432/database)");
    return new PrismaPg(poolConfig(databaseUrl));
  },
});
