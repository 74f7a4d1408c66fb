/**
 * `/readyz` is public: it names the dependency that is down and nothing else (no error text,
 * address or port); the reason goes to the log and, by error code, to `/metrics`.
 */
import { describe, expect, it } from "@jest/globals";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { closeServer, createApp, healthRouter, listen } from "./http.js";
import { createLogger } from "./logger.js";
import { createServiceMetrics, metricsRouter } from "./metrics.js";

const refused = () => Promise.reject(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), { code: "ECONNREFUSED" }));

describe("GET /readyz", () => {
  it("answers {name, ok: false} for the dependency down, without its error; logs the reason; counts it in /metrics by code", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
        done();
      },
    });
    const logger = createLogger("test-service", "info", "json", sink);
    const metrics = createServiceMetrics("test-service");
    const app = createApp(logger);
    app.use(healthRouter([{ name: "s3", check: refused }, { name: "redis", check: async () => "PONG" }], logger, metrics));
    app.use(metricsRouter(metrics));
    const server = await listen(app, 0, "127.0.0.1");
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const res = await fetch(`${base}/readyz`);
      const text = await res.text();
      expect(res.status).toBe(503);
      expect(JSON.parse(text)).toEqual({ status: "unavailable", checks: [{ name: "s3", ok: false }, { name: "redis", ok: true }] });
      expect(text).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|:9\b/);

      const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === "s3 unreachable");
      expect(logged).toMatchObject({ dependency: "s3", check: "readiness", error: { code: "ECONNREFUSED", message: "connect ECONNREFUSED 127.0.0.1:9" } });

      const exposition = await (await fetch(`${base}/metrics`)).text();
      expect(exposition).toMatch(/^vw_readiness_check_up\{check="s3"\} 0$/m);
      expect(exposition).toMatch(/^vw_readiness_check_up\{check="redis"\} 1$/m);
      expect(exposition).toMatch(/^vw_readiness_check_failures_total\{check="s3",reason="ECONNREFUSED"\} 1$/m);
      expect(exposition).not.toContain("127.0.0.1");
    } finally {
      await closeServer(server);
    }
  });
});
