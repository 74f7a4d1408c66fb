/**
 * Shared pieces of the webhook endpoint integration tests: a fake DNS (no test uses real DNS),
 * a world to put endpoints in, and the checks every endpoint answer must pass.
 */
import { expect } from "@jest/globals";
import { compileValidator, ENDPOINT_SCHEMA, ENDPOINT_WITH_SECRET_SCHEMA } from "@vw/contracts";
import type { HostResolver, ResolvedAddress } from "@vw/webhook-core";
import type { AdminApiHarness, TestResponse } from "./harness.js";

/**
 * A public address for the fake DNS's public names. (The documentation ranges cannot stand in:
 * the URL policy refuses them like any other special-purpose range.) Nothing ever connects to it.
 */
export const PUBLIC_ADDRESS = "93.184.215.14";

/** Names the fake DNS knows; any other name does not resolve. */
const FAKE_ZONE: Record<string, ResolvedAddress[]> = {
  "hooks.example.com": [{ address: PUBLIC_ADDRESS, family: 4 }],
  "other-hooks.example.com": [
    { address: "1.1.1.1", family: 4 },
    { address: "2606:4700:4700::1111", family: 6 },
  ],
  "internal.example.com": [{ address: "10.20.30.40", family: 4 }],
  "rebind.example.com": [
    { address: "8.8.8.8", family: 4 },
    { address: "192.168.1.5", family: 4 },
  ],
  "ula.example.com": [{ address: "fd12:3456::1", family: 6 }],
  "loopback.example.com": [{ address: "127.0.0.1", family: 4 }],
};

/** A resolver over {@link FAKE_ZONE} that records every name it was asked for. */
export function fakeDns(): { resolve: HostResolver; asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    resolve: async (hostname) => {
      asked.push(hostname);
      const answer = FAKE_ZONE[hostname.toLowerCase()];
      if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
      return answer;
    },
  };
}

/** Creates an organization with one world; returns its slugs and the endpoints collection path. */
export async function worldWithEndpoints(api: AdminApiHarness): Promise<{ org: string; world: string; endpoints: string }> {
  const org = api.slug("org");
  expect((await api.request("POST", "/admin/v1/organizations", { body: { slug: org, name: "Org" } })).status).toBe(201);
  const world = "main";
  const created = await api.request("POST", `/admin/v1/organizations/${org}/worlds`, { body: { slug: world, name: "W", adminEmails: ["a@example.com"] } });
  expect(created.status).toBe(201);
  return { org, world, endpoints: `/admin/v1/worlds/${org}/${world}/endpoints` };
}

const isEndpoint = compileValidator(ENDPOINT_SCHEMA);
const isEndpointWithSecret = compileValidator(ENDPOINT_WITH_SECRET_SCHEMA);

/** Asserts an endpoint answer matches the published schema (with or without the secret). */
export function expectEndpointShape(body: unknown, withSecret = false): void {
  expect((withSecret ? isEndpointWithSecret : isEndpoint)(body)).toEqual({ ok: true, value: body });
}

/** Asserts a problem document: status, media type and, when given, its type code. */
export function expectProblem(res: TestResponse, status: number, code?: string): void {
  expect({ status: res.status, contentType: res.headers.get("content-type") }).toEqual({
    status,
    contentType: expect.stringMatching(/^application\/problem\+json/),
  });
  if (code) expect(res.body.type).toBe(`/problems/${code}`);
}

/** Creates an endpoint that must be accepted; returns the answer body (with its secret). */
export async function createEndpoint(api: AdminApiHarness, endpoints: string, body: unknown = { url: "https://hooks.example.com/webhooks", subscriptions: ["recording"] }) {
  const res = await api.request("POST", endpoints, { body });
  expect(res.status).toBe(201);
  return res.body as { id: string; secret: string; [k: string]: any };
}

/** The raw database row, every column as PostgreSQL holds it, as JSON text. */
export async function rawRow(api: AdminApiHarness, id: string): Promise<string> {
  const rows = await api.prisma.$queryRaw<{ row: string }[]>`SELECT row_to_json(e)::text AS row FROM webhook_endpoints e WHERE id = ${id}::uuid`;
  return rows[0]?.row ?? "";
}
