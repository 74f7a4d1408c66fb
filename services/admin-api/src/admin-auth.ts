import type { RequestHandler } from "express";
import { bearerAuth } from "@vw/service-kit";

/** Requires `Authorization: Bearer <ADMIN_TOKEN>` (constant-time; 401 with `WWW-Authenticate`). */
export function adminAuth(adminToken: string): RequestHandler {
  return bearerAuth({ token: adminToken, realm: "admin-api", variable: "ADMIN_TOKEN", label: "admin token" });
}
