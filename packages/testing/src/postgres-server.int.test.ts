import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { isAlive } from "./owned-processes.js";
import { startPostgres, type PrivatePostgres } from "./postgres-server.js";

let server: PrivatePostgres;
beforeAll(async () => {
  server = await startPostgres();
}, 60_000);
afterAll(async () => {
  await server?.stop();
});

async function query<T>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

describe("startPostgres", () => {
  it("runs PostgreSQL 15 on its own loopback port with the default settings (autovacuum on) and trust auth", async () => {
    expect(server.port).not.toBe(5432);
    expect(server.url()).toBe(`postgresql://postgres@127.0.0.1:${server.port}/postgres`);
    const [row] = await query<{ version: string; autovacuum: string }>(server.url(), "SELECT current_setting('server_version') AS version, current_setting('autovacuum') AS autovacuum");
    expect(row?.version).toMatch(/^15\./);
    expect(row?.autovacuum).toBe("on");
  });

  it("creates a database, and keeps its committed rows through an immediate stop (a crash) and a start", async () => {
    const url = await server.createDatabase("fault_db");
    expect(url).toBe(server.url("fault_db"));
    await query(url, "CREATE TABLE t (v text); INSERT INTO t VALUES ('committed')");
    const before = server.pid;
    expect(before).not.toBeNull();
    await server.stopImmediate();
    expect(server.pid).toBeNull();
    expect(isAlive(before!)).toBe(false);
    await expect(query(url, "SELECT 1")).rejects.toThrow(/ECONNREFUSED/);
    await server.start();
    expect(server.pid).not.toBe(before);
    expect(await query<{ v: string }>(url, "SELECT v FROM t")).toEqual([{ v: "committed" }]);
  });

  it("refuses a database name it would have to quote", async () => {
    await expect(server.createDatabase('x"; DROP DATABASE postgres; --')).rejects.toThrow(/database name/);
  });

  it("stop() ends the postmaster by pid; a second stop is harmless", async () => {
    const other = await startPostgres();
    const pid = other.pid!;
    expect(isAlive(pid)).toBe(true);
    await other.stop();
    expect(isAlive(pid)).toBe(false);
    await other.stop();
    await expect(other.start()).rejects.toThrow(/was stopped/);
  });
});
