import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "@jest/globals";
import { OpenApiConformance } from "./openapi-conformance.js";
import { compareRoutes } from "./registered-routes.js";

/** A tiny document: one operation with a JSON answer, a problem answer and a JSON request body. */
const DOCUMENT = {
  openapi: "3.1.0",
  paths: {
    "/things/{id}": {
      put: {
        requestBody: { required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/Thing" } } } },
        responses: {
          "200": { description: "ok", content: { "application/json": { schema: { $ref: "#/components/schemas/Thing" } } } },
          "404": { description: "missing", content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } } },
        },
      },
    },
    "/files/{path}": {
      parameters: [],
      get: {
        parameters: [{ name: "path", in: "path", required: true, schema: { type: "string" }, "x-multi-segment": true }],
        responses: { "204": { description: "empty" } },
      },
    },
  },
  components: {
    schemas: {
      Thing: { type: "object", additionalProperties: false, required: ["name"], properties: { name: { type: "string" } } },
      Problem: { type: "object", required: ["type", "status"], properties: { type: { enum: ["/problems/not-found"] }, status: { type: "integer" } } },
    },
  },
};

let server: Server | undefined;
afterEach(async () => {
  await new Promise((resolve) => server?.close(resolve));
});

/** Serves `answer` for every request (reading the body first), recorded by a fresh recorder. */
async function serve(answer: { status: number; type?: string; body?: string }) {
  const conformance = new OpenApiConformance(DOCUMENT, "tiny");
  server = createServer((req, res) => {
    req.on("data", () => undefined);
    req.on("end", () => {
      res.statusCode = answer.status;
      if (answer.type) res.setHeader("content-type", answer.type);
      res.end(answer.body);
    });
  });
  conformance.attach(server);
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const send = (method: string, path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
    }).then((res) => res.text());
  return { conformance, send };
}

describe("OpenApiConformance", () => {
  it("accepts answers and requests that match the document", async () => {
    const { conformance, send } = await serve({ status: 200, type: "application/json", body: '{"name":"a"}' });
    await send("PUT", "/things/1", { name: "a" });
    expect(conformance.exchanges).toHaveLength(1);
    expect(conformance.mismatches()).toEqual([]);
    expect(() => conformance.assertConforms()).not.toThrow();
  });

  it("names route, status and schema error of an answer that breaks its schema", async () => {
    const { conformance, send } = await serve({ status: 200, type: "application/json", body: '{"name":1}' });
    await send("PUT", "/things/1", { name: "a" });
    expect(conformance.mismatches()).toEqual([expect.stringMatching(/^PUT \/things\/1 -> 200: route PUT \/things\/\{id\}: the 200 body does not match its schema: \/name must be string/)]);
    expect(() => conformance.assertConforms()).toThrow(/1 answer\(s\) of tiny do not match/);
  });

  it("flags an undocumented status, media type, route and method, and a successful request the schema refuses", async () => {
    const wrongStatus = await serve({ status: 201, type: "application/json", body: '{"name":"a"}' });
    await wrongStatus.send("PUT", "/things/1", { name: "a" });
    expect(wrongStatus.conformance.mismatches()).toEqual([expect.stringContaining("status 201 is not documented")]);
    server?.close();

    const wrongType = await serve({ status: 404, type: "text/plain", body: "nope" });
    await wrongType.send("PUT", "/things/1", { name: "a" });
    await wrongType.send("GET", "/elsewhere");
    await wrongType.send("DELETE", "/things/1");
    expect(wrongType.conformance.mismatches()).toEqual([
      expect.stringContaining("media type text/plain is not documented for 404"),
      expect.stringContaining("not application/problem+json"),
      expect.stringContaining("has no delete operation"),
    ]);
    server?.close();

    const badRequest = await serve({ status: 200, type: "application/json", body: '{"name":"a"}' });
    await badRequest.send("PUT", "/things/1", { name: "a", extra: true });
    expect(badRequest.conformance.mismatches()).toEqual([expect.stringContaining("the request body of a 200 does not match its schema")]);
  });

  it("lets a multi-segment parameter span slashes, and checks bodyless answers", async () => {
    const { conformance, send } = await serve({ status: 204 });
    await send("GET", "/files/rooms/hall.wam");
    expect(conformance.mismatches()).toEqual([]);
  });
});

describe("compareRoutes", () => {
  it("finds routes missing on either side, ignoring parameter names", () => {
    const result = compareRoutes(
      [
        { method: "put", path: "/things/{thingId}" },
        { method: "post", path: "/things" },
        { method: "get", path: "^\\/files\\/.+$", pattern: /^\/files\/.+$/ },
      ],
      DOCUMENT,
    );
    expect(result).toEqual({ undocumented: ["POST /things"], unregistered: [] });
    expect(compareRoutes([], DOCUMENT).unregistered).toEqual(["PUT /things/{id}", "GET /files/{path}"]);
  });
});
