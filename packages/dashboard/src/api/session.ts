/**
 * Dashboard sessions (admin-api `/dashboard/api/session`): the one-time code of a link is
 * exchanged for an HttpOnly cookie; the page only ever sees the session's description.
 */
import type { DashboardCapability, DashboardSessionResource } from "@vw/contracts";
import { apiRequest } from "./client.js";

/** What a session may do; `view` is implied by any other. */
export type Capability = DashboardCapability;

/** `POST`/`GET /dashboard/api/session` answer. */
export type DashboardSession = DashboardSessionResource;

const SESSION_PATH = "/dashboard/api/session";

/** Exchanges the link's one-time code for the session cookie. */
export const exchangeCode = (code: string) => apiRequest<DashboardSession>("POST", SESSION_PATH, { code });
/** The session of the current cookie (401 problem when there is none). */
export const currentSession = () => apiRequest<DashboardSession>("GET", SESSION_PATH);
/** Ends the session (the cookie stops working at once). */
export const signOut = () => apiRequest<void>("DELETE", SESSION_PATH);

/**
 * Reads `code` from a `#code=...` fragment. The code travels in the fragment so that link
 * scanners prefetching URLs never send it, and it never reaches access logs.
 */
export function codeFromFragment(hash: string): string | null {
  const params = new URLSearchParams(hash.replace(/^#/, ""));
  const code = params.get("code");
  return code && code.trim() !== "" ? code.trim() : null;
}
