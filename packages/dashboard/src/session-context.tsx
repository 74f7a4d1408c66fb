/**
 * The signed-in session, its world's API and what it may do, for every screen below the shell.
 */
import { createContext, useContext } from "react";
import type { Capability, DashboardSession } from "./api/session.js";
import type { WorldApi } from "./api/world-api.js";

export interface SessionContextValue {
  session: DashboardSession;
  api: WorldApi;
}

export const SessionContext = createContext<SessionContextValue | null>(null);

/** The current session; only used below the shell, which provides it. */
export function useSession(): SessionContextValue {
  const value = useContext(SessionContext);
  if (value === null) throw new Error("useSession outside a signed-in dashboard");
  return value;
}

const CAPABILITY_REASONS: Record<Exclude<Capability, "view">, string> = {
  "manage-endpoints": "This session can only view endpoints: it lacks the manage-endpoints capability.",
  "manage-api-keys": "This session can only view API keys: it lacks the manage-api-keys capability.",
  send: "This session cannot send deliveries (Test, Replay, recover): it lacks the send capability.",
};

/**
 * Whether the session may do what `capability` covers, and if not, the sentence shown next to
 * the disabled control (the API refuses it with 403 anyway).
 */
export function useCapability(capability: Exclude<Capability, "view">): { allowed: boolean; reason: string | null } {
  const { session } = useSession();
  const allowed = session.capabilities.includes(capability);
  return { allowed, reason: allowed ? null : CAPABILITY_REASONS[capability] };
}
