import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { PrismaClient } from "@vw/db";
import { AppError } from "@vw/service-kit";
import {
  DASHBOARD_CAPABILITIES,
  DASHBOARD_CODE_TTL_SECONDS,
  DEFAULT_DASHBOARD_SESSION_TTL_SECONDS,
  normalizeDashboardCapabilities,
  type CreateDashboardSessionRequest,
  type DashboardCapability,
  type DashboardSessionLinkResource,
  type DashboardSessionResource,
} from "@vw/contracts";
import type { WorldsService } from "./worlds.service.js";

/** A valid session, as the request authenticator needs it. */
export interface AuthenticatedSession {
  id: string;
  worldId: string;
  organization: string;
  world: string;
  worldName: string;
  capabilities: DashboardCapability[];
  expiresAt: Date;
}

/** What the session service is built from besides the database and the worlds. */
export interface DashboardSessionsOptions {
  /** PUBLIC_ADMIN_URL without a trailing slash: links are `<this>/dashboard/#code=...`. */
  publicAdminUrl: string;
  /** Wall clock of expiries; the system clock unless injected (tests move it past an expiry). */
  now?: () => Date;
}

/** 32 random bytes, base64url: the one-time code and the session token. */
const newSecret = () => randomBytes(32).toString("base64url");
/** Only digests are stored: a database leak opens no session and no link. */
const digest = (value: string) => createHash("sha256").update(value, "utf8").digest("base64url");

const isCapability = (value: string): value is DashboardCapability => (DASHBOARD_CAPABILITIES as readonly string[]).includes(value);

/**
 * Dashboard sessions of worlds: the platform mints a one-time link, the page exchanges its code
 * once for a session token (the cookie), every request authenticates that token, and the
 * platform can revoke every session of a world at once.
 *
 * Sessions live in PostgreSQL (`dashboard_sessions`) and every request reads its row, so every
 * admin-api replica sees a session as soon as it exists and a revocation or a sign-out takes
 * effect on the very next request. The exchange is one conditional UPDATE, so two pages racing
 * with the same code get one session between them.
 */
export class DashboardSessionsService {
  private readonly now: () => Date;

  constructor(
    private readonly prisma: PrismaClient,
    private readonly worlds: WorldsService,
    private readonly options: DashboardSessionsOptions,
  ) {
    this.now = options.now ?? (() => new Date());
  }

  /**
   * A one-time link for the world. The session it opens ends `ttlSeconds` after NOW, not after the
   * link is opened, so `expiresAt` is known to the platform at once. Expired rows of every world
   * are removed on the way (the table stays as small as the number of live sessions).
   */
  async mint(organizationSlug: string, worldSlug: string, request: CreateDashboardSessionRequest): Promise<DashboardSessionLinkResource> {
    const world = await this.worlds.find(organizationSlug, worldSlug);
    const now = this.now();
    const capabilities = normalizeDashboardCapabilities(request.capabilities);
    const expiresAt = new Date(now.getTime() + (request.ttlSeconds ?? DEFAULT_DASHBOARD_SESSION_TTL_SECONDS) * 1000);
    // A link opened after its session ended would open nothing: the code dies with the session.
    const codeExpiresAt = new Date(Math.min(now.getTime() + DASHBOARD_CODE_TTL_SECONDS * 1000, expiresAt.getTime()));
    const code = newSecret();
    await this.prisma.dashboardSession.deleteMany({ where: { expiresAt: { lt: now } } });
    await this.prisma.dashboardSession.create({
      data: { id: randomUUID(), worldId: world.id, codeHash: digest(code), codeExpiresAt, capabilities, expiresAt, createdAt: now },
    });
    return { url: `${this.options.publicAdminUrl}/dashboard/#code=${code}`, expiresAt: expiresAt.toISOString(), capabilities };
  }

  /** Ends every session of the world and voids its unopened links; 404 for an unknown world. */
  async revokeAll(organizationSlug: string, worldSlug: string): Promise<void> {
    const world = await this.worlds.find(organizationSlug, worldSlug);
    await this.prisma.dashboardSession.deleteMany({ where: { worldId: world.id } });
  }

  /**
   * Exchanges a link's code for a new session token, once. An unknown code (never minted,
   * mistyped, or its world's sessions revoked) is 401; a code already used or past its 10 minutes
   * is 410, each with a detail the page shows as is.
   */
  async exchange(code: string): Promise<{ token: string; session: AuthenticatedSession }> {
    const codeHash = digest(code);
    const now = this.now();
    const token = newSecret();
    const { count } = await this.prisma.dashboardSession.updateMany({
      where: { codeHash, exchangedAt: null, codeExpiresAt: { gt: now }, expiresAt: { gt: now } },
      data: { exchangedAt: now, tokenHash: digest(token) },
    });
    if (count === 0) {
      const row = await this.prisma.dashboardSession.findUnique({ where: { codeHash }, select: { exchangedAt: true } });
      if (!row) {
        throw new AppError(401, "dashboard-link-invalid", "This dashboard link is not valid: it was never issued, or its sessions were revoked. Ask for a new link.");
      }
      if (row.exchangedAt !== null) {
        throw new AppError(410, "dashboard-link-used", "This dashboard link has already been used; a link opens the dashboard once. Ask for a new link.");
      }
      throw new AppError(410, "dashboard-link-expired", "This dashboard link has expired; a link must be opened within 10 minutes. Ask for a new link.");
    }
    const session = await this.authenticate(token);
    // Revoked in the instant between the two statements.
    if (!session) throw new AppError(401, "dashboard-link-invalid", "This dashboard link is not valid any more: its sessions were revoked. Ask for a new link.");
    return { token, session };
  }

  /** The live session of a token, or null (unknown, signed out, revoked or expired). */
  async authenticate(token: string): Promise<AuthenticatedSession | null> {
    const row = await this.prisma.dashboardSession.findUnique({
      where: { tokenHash: digest(token) },
      include: { world: { include: { organization: true } } },
    });
    if (!row || row.expiresAt.getTime() <= this.now().getTime()) return null;
    return {
      id: row.id,
      worldId: row.worldId,
      organization: row.world.organization.slug,
      world: row.world.slug,
      worldName: row.world.name,
      capabilities: row.capabilities.filter(isCapability),
      expiresAt: row.expiresAt,
    };
  }

  /** Ends the session of a token (nothing when it has already ended). */
  async signOut(token: string): Promise<void> {
    await this.prisma.dashboardSession.deleteMany({ where: { tokenHash: digest(token) } });
  }
}

/** The page's view of a session. */
export function toDashboardSessionResource(session: AuthenticatedSession): DashboardSessionResource {
  return {
    organization: session.organization,
    world: session.world,
    worldName: session.worldName,
    capabilities: session.capabilities,
    expiresAt: session.expiresAt.toISOString(),
  };
}
