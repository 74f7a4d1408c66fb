import { describe, expect, it } from "@jest/globals";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { AppError } from "./errors.js";
import { closeServer, createApp, errorMiddleware, listen, notFoundHandler } from "./http.js";
import { createLogger, type Logger } from "./logger.js";
import type { LogFormat } from "./config.js";

/** A logger of `format` whose lines are kept in memory. */
function memoryLogger(format: LogFormat, level = "debug"): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  let partial = "";
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      partial += chunk.toString("utf8");
      const parts = partial.split("\n");
      partial = parts.pop() ?? "";
      lines.push(...parts.filter((l) => l !== ""));
      done();
    },
  });
  return { logger: createLogger("test-service", level, format, sink), lines };
}

async function withApp<T>(logger: Logger, run: (base: string) => Promise<T>, options: { requestContext?: boolean } = {}): Promise<T> {
  const app = createApp(logger, options);
  app.get("/work", (_req, res) => {
    logger.info({ step: "inside" }, "doing the work");
    res.json({ ok: true });
  });
  app.get("/refused", () => {
    throw new AppError(409, "patch-conflict", "Not now.");
  });
  app.get("/broken", () => {
    throw new Error("boom");
  });
  app.use(notFoundHandler);
  app.use(errorMiddleware(logger));
  const server = await listen(app, 0, "127.0.0.1", logger);
  try {
    return await run(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    await closeServer(server);
  }
}

describe("request ids and the request log", () => {
  it("without the request context (operations apps) still logs the request with its id, but lines below the route carry none", async () => {
    const { logger, lines } = memoryLogger("json");
    await withApp(
      logger,
      async (base) => {
        const ok = await fetch(`${base}/work`, { headers: { "x-request-id": "ops-1" } });
        expect(ok.headers.get("x-request-id")).toBe("ops-1");
      },
      { requestContext: false },
    );
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, any>);
    const inside = parsed.find((l) => l.step === "inside")!;
    expect(inside).toBeDefined();
    expect(inside.requestId).toBeUndefined();
    const request = parsed.find((l) => l.msg === "request")!;
    expect(request).toMatchObject({ requestId: "ops-1", method: "GET", path: "/work", status: 200 });
  });

  it("tags every line of a request with its id, echoes a sane caller id and writes one line per request", async () => {
    const { logger, lines } = memoryLogger("json");
    await withApp(logger, async (base) => {
      const ok = await fetch(`${base}/work`, { headers: { "x-request-id": "abc-123" } });
      expect(ok.headers.get("x-request-id")).toBe("abc-123");
      const refused = await fetch(`${base}/refused`);
      const generated = refused.headers.get("x-request-id")!;
      expect(generated).toMatch(/^[0-9a-f-]{36}$/);
      const replaced = await fetch(`${base}/work`, { headers: { "x-request-id": "no spaces allowed" } });
      expect(replaced.headers.get("x-request-id")).not.toBe("no spaces allowed");
      await fetch(`${base}/broken`);
    });
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, any>);
    const of = (id: string) => parsed.filter((l) => l.requestId === id);
    expect(of("abc-123").map((l) => l.msg)).toEqual(["doing the work", "request"]);
    const refusedLines = parsed.filter((l) => l.path === "/refused");
    expect(refusedLines).toHaveLength(1);
    expect(refusedLines[0]).toMatchObject({ level: 40, msg: "request", status: 409, code: "patch-conflict", detail: "Not now." });
    const broken = parsed.filter((l) => l.path === "/broken");
    expect(broken).toHaveLength(1);
    expect(broken[0]).toMatchObject({ level: 50, status: 500, code: "internal", errorId: expect.any(String), err: { message: "boom" } });
    // Lines logged after the answer are not tagged with a finished request's id.
    logger.info("later");
    expect(JSON.parse(lines.at(-1)!)).not.toHaveProperty("requestId");
  });

  it("writes human-readable single lines with LOG_FORMAT=pretty", async () => {
    const { logger, lines } = memoryLogger("pretty");
    await withApp(logger, async (base) => {
      await fetch(`${base}/refused`, { headers: { "x-request-id": "pretty-1" } });
    });
    const line = lines.find((l) => l.includes("pretty-1"));
    expect(line).toBeDefined();
    expect(line).toContain("WARN");
    expect(line).toContain("test-service request");
    expect(() => JSON.parse(line!)).toThrow();
  });
});
