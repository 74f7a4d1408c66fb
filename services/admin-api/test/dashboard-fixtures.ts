/**
 * Shared pieces of the dashboard integration tests: minting a link as the platform does, opening
 * it as the page does (same Origin, the code from the fragment), and requests carrying the
 * session cookie the way a browser would.
 */
import { expect } from "@jest/globals";
import type { AdminApiHarness, RequestOptions, TestResponse } from "./harness.js";

/** A dashboard session opened through its link: the `Cookie` header value and the session body. */
export interface OpenedSession {
  cookie: string;
  setCookie: string;
  session: { organization: string; world: string; worldName: string; capabilities: string[]; expiresAt: string };
}

/** The code in a minted link's fragment (`.../dashboard/#code=<code>`). */
export function codeOf(url: string): string {
  const code = new URLSearchParams(new URL(url).hash.slice(1)).get("code");
  if (!code) throw new Error(`no code in ${url}`);
  return code;
}

/** Mints a link for the world with the operator's token; returns the 201 answer. */
export async function mintLink(api: AdminApiHarness, org: string, world: string, body?: unknown): Promise<TestResponse> {
  return api.request("POST", `/admin/v1/worlds/${org}/${world}/dashboard-sessions`, body === undefined ? {} : { body });
}

/** Exchanges a code as the page does (POST with the dashboard's own Origin). */
export function exchange(api: AdminApiHarness, origin: string, code: string): Promise<TestResponse> {
  return api.request("POST", "/dashboard/api/session", { token: null, body: { code }, headers: { origin } });
}

/** `name=value` of a Set-Cookie header (what the browser sends back). */
export const cookiePair = (setCookie: string) => setCookie.split(";")[0] ?? "";

/** Mints and opens a session for the world; fails the test if either step fails. */
export async function openSession(api: AdminApiHarness, origin: string, org: string, world: string, body?: unknown): Promise<OpenedSession> {
  const minted = await mintLink(api, org, world, body);
  expect(minted.status).toBe(201);
  const opened = await exchange(api, origin, codeOf(minted.body.url));
  expect(opened.status).toBe(200);
  const setCookie = opened.headers.get("set-cookie") ?? "";
  return { cookie: cookiePair(setCookie), setCookie, session: opened.body };
}

/**
 * A request authenticated by the session cookie only, as the page makes it: with the dashboard's
 * Origin unless `origin` is null (or another origin is given).
 */
export function asSession(api: AdminApiHarness, opened: OpenedSession, origin: string | null) {
  return (method: string, path: string, options: RequestOptions = {}) =>
    api.request(method, path, {
      ...options,
      token: null,
      headers: { cookie: opened.cookie, ...(origin === null ? {} : { origin }), ...options.headers },
    });
}
