import type { RequestHandler } from "express";
import { bearerAuth, type AuthThrottle } from "@vw/service-kit";

/**
 * Requires `Authorization: Bearer <ADMIN_TOKEN>` (constant-time; 401 with `WWW-Authenticate`); with
 * a `throttle`, a client that sent too many wrong tokens gets 429 whatever it sends.
 */
export function adminAuth(adminToken: string, throttle?: AuthThrottle): RequestHandler {
  return bearerAuth({ token: adminToken, realm: "admin-api", variable: "ADMIN_TOKEN", label: "admin token", ...(throttle ? { throttle } : {}) });
}
