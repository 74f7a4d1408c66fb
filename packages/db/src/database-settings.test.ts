import { describe, expect, it } from "@jest/globals";
import { readDatabaseSettings, type DatabaseEnvReader } from "./database-settings.js";

/** The few EnvReader methods readDatabaseSettings uses, over a plain object (service-kit's reader behaves alike). */
function reader(env: Record<string, string>): DatabaseEnvReader & { problems: string[] } {
  const problems: string[] = [];
  return {
    problems,
    url: (name) => {
      const v = env[name];
      if (v === undefined) {
        problems.push(`${name} is required`);
        return "";
      }
      return v;
    },
    optionalString: (name) => env[name],
    int: (name, fallback, opts = {}) => {
      const v = env[name];
      if (v === undefined) return fallback;
      const n = Number(v);
      if (opts.min !== undefined && n < opts.min) problems.push(`${name} too small`);
      return n;
    },
    problem: (m) => problems.push(m),
  };
}

const opts = { service: "event-ingest", defaultPoolMax: 12 };

describe("readDatabaseSettings", () => {
  it("uses DATABASE_URL for both paths and the service's defaults when nothing else is set", () => {
    const r = reader({ DATABASE_URL: "postgresql://app:pw@db:5432/vw?sslmode=require" });
    expect(readDatabaseSettings(r, opts)).toEqual({
      url: "postgresql://app:pw@db:5432/vw?sslmode=require",
      directUrl: "postgresql://app:pw@db:5432/vw?sslmode=require",
      pgbouncer: false,
      poolMax: 12,
      applicationName: "event-ingest",
    });
    expect(r.problems).toEqual([]);
  });

  it("strips pgbouncer=true from the pooled URL and keeps DIRECT_URL for migrations and LISTEN", () => {
    const r = reader({
      DATABASE_URL: "postgresql://app:pw@bouncer:6432/vw?pgbouncer=true&sslmode=disable",
      DIRECT_URL: "postgresql://app:pw@db:5432/vw",
      DATABASE_POOL_MAX: "5",
    });
    const s = readDatabaseSettings(r, opts);
    expect(s.pgbouncer).toBe(true);
    expect(new URL(s.url).searchParams.has("pgbouncer")).toBe(false);
    expect(new URL(s.url).searchParams.get("sslmode")).toBe("disable");
    expect(s.url).toContain("bouncer:6432");
    expect(s.directUrl).toBe("postgresql://app:pw@db:5432/vw");
    expect(s.poolMax).toBe(5);
    expect(r.problems).toEqual([]);
  });

  it("falls back to the stripped DATABASE_URL when DIRECT_URL is unset, and reads pgbouncer=false as off", () => {
    const on = readDatabaseSettings(reader({ DATABASE_URL: "postgresql://db/vw?pgbouncer=true" }), opts);
    expect(on.directUrl).toBe(on.url);
    expect(on.directUrl).not.toContain("pgbouncer");
    const off = readDatabaseSettings(reader({ DATABASE_URL: "postgresql://db/vw?pgbouncer=false" }), opts);
    expect(off.pgbouncer).toBe(false);
    expect(off.url).not.toContain("pgbouncer");
  });

  it("names a pgbouncer value that is neither true nor false, and a pool size below 1", () => {
    const r = reader({ DATABASE_URL: "postgresql://db/vw?pgbouncer=yes-please", DATABASE_POOL_MAX: "0" });
    readDatabaseSettings(r, opts);
    expect(r.problems).toEqual(["DATABASE_URL's pgbouncer parameter must be true or false, got \"yes-please\"", "DATABASE_POOL_MAX too small"]);
  });
});
