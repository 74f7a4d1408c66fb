import { createHash, timingSafeEqual } from "node:crypto";
import express, { type Request, type RequestHandler, type Router } from "express";
import type { UploadResult } from "@vw/contracts";
import type { ApiKeyPrincipal } from "@vw/db";
import { AppError, clientAddress, type ApiKeyAuthenticator, type Logger } from "@vw/service-kit";
import { SLUG_PATTERN, type FilePath } from "../files/file-path.js";
import { roomUrl } from "../files/files.routes.js";
import type { ObjectStore } from "../storage/object-store.js";
import { sendDirectoryZip } from "./download.js";
import { spoolUpload } from "./multipart-spool.js";
import { ROOMS_PAGE, decodeCursor, type RoomsService } from "./rooms.service.js";
import type { UploadService } from "./upload.service.js";
import type { UploadSlots } from "./upload-slots.js";
import { directoryPrefix, parseDirectory } from "./upload-paths.js";
import type { WorldCache } from "./world-directory.js";

export interface ToolsRoutesDeps {
  uploads: UploadService;
  rooms: RoomsService;
  store: ObjectStore;
  worlds: WorldCache;
  auth: ApiKeyAuthenticator<ApiKeyPrincipal>;
  logger: Logger;
  publicBaseUrl: string;
  playUrl: string;
  /** Largest zip accepted as sent. */
  maxZipBytes: number;
  uploadTmpDir: string;
  /** The operator's token, also accepted by the room listing; null: world keys only. */
  adminToken: string | null;
  /** MAX_CONCURRENT_UPLOADS of this process, each spooled, checked and published in one slot. */
  uploadSlots: UploadSlots;
}

interface World {
  org: string;
  world: string;
}

/** What the operator's token stands for on the room listing. */
const OPERATOR = Symbol("operator");

const digest = (value: string) => createHash("sha256").update(value, "utf8").digest();

function worldOf(req: Request): World {
  const { organization = "", world = "" } = req.params as Record<string, string | undefined>;
  for (const [what, slug] of [["organization", organization], ["world", world]] as const) {
    if (!SLUG_PATTERN.test(slug)) {
      const detail = `'${slug}' is not a valid ${what} slug.`;
      throw new AppError(400, "invalid-path", detail, { errors: [{ pointer: "", detail }] });
    }
  }
  return { org: organization, world };
}

/** One `?name=` value; a repeated parameter is refused rather than guessed at. */
function queryParam(req: Request, name: string): string | undefined {
  const value = req.query[name];
  if (value === undefined) return undefined;
  if (typeof value !== "string") throw new AppError(400, "invalid-parameter", `Give '${name}' once.`, { parameter: name });
  return value;
}

/** The routes of each tool, by reserved root name, and the methods each answers. */
const TOOL_METHODS: Record<string, string> = { ping: "GET, HEAD, OPTIONS", upload: "POST, OPTIONS", download: "GET, HEAD, OPTIONS", rooms: "GET, HEAD, OPTIONS" };

/**
 * Map authors' tools on a world's base address, as WorkAdventure's map-storage answers them (the
 * `@workadventure/upload-maps` CLI is the client): `GET {base}/ping`, `POST {base}/upload`,
 * `GET {base}/download`, plus `GET {base}/rooms`. Mounted before the files API, whose paths these
 * root names can then never be (a write to one is refused with 405 saying it is reserved).
 */
export function toolsRouter(deps: ToolsRoutesDeps): Router {
  const adminDigest = deps.adminToken === null ? null : digest(deps.adminToken);

  const sameWorld = (principal: ApiKeyPrincipal, w: World): ApiKeyPrincipal => {
    if (principal.organization !== w.org || principal.world !== w.world) {
      throw new AppError(403, "wrong-world", `This API key belongs to world '${principal.organization}/${principal.world}', not '${w.org}/${w.world}'.`);
    }
    return principal;
  };

  /** The world's API key, throttled per client like the files API's. */
  const authorize = async (req: Request, w: World): Promise<ApiKeyPrincipal> => sameWorld(await deps.auth.authenticate(req.headers.authorization, clientAddress(req)), w);

  /**
   * The operator's token or the world's API key, checked under the same throttle: a client that
   * failed too often is refused before its token is compared, so the listing is no way around the
   * throttle. The token is compared in constant time, both sides hashed first so its length does
   * not leak either.
   */
  const operator = (authorization: string | undefined): typeof OPERATOR | null => {
    const m = /^Bearer +(\S+) *$/i.exec(authorization ?? "");
    return adminDigest !== null && m?.[1] !== undefined && timingSafeEqual(digest(m[1]), adminDigest) ? OPERATOR : null;
  };
  const authorizeOperatorOrWorld = async (req: Request, w: World): Promise<void> => {
    const who = await deps.auth.authenticateOr(req.headers.authorization, clientAddress(req), operator);
    if (who !== OPERATOR) sameWorld(who, w);
  };

  const roomUrlOf = (customDomain: string | null) => (file: FilePath) => roomUrl(deps.playUrl, file, customDomain);

  const ping: RequestHandler = async (req, res) => {
    const w = worldOf(req);
    if (!(await deps.worlds.find(w.org, w.world))) {
      throw new AppError(404, "unknown-world", `There is no world '${w.org}/${w.world}' here: check the map-storage base address the dashboard shows.`);
    }
    res.setHeader("Cache-Control", "no-store");
    res.json({ status: "ok" });
  };

  const upload: RequestHandler = async (req, res) => {
    const w = worldOf(req);
    const principal = await authorize(req, w);
    await deps.uploadSlots.run(async () => {
      const spooled = await spoolUpload(req, res, { maxZipBytes: deps.maxZipBytes, tmpDir: deps.uploadTmpDir });
      try {
        const directory = parseDirectory(spooled.directory);
        const outcome = await deps.uploads.upload(w.org, w.world, directory, spooled.zipPath);
        const toRoomUrl = roomUrlOf(principal.customDomain);
        const body: UploadResult = {
          directory: outcome.directory,
          files: outcome.files.length,
          bytes: outcome.bytes,
          removed: outcome.removed,
          skipped: outcome.skipped,
          rooms: outcome.files
            .filter((f) => f.extension === "wam")
            .map((f) => ({ path: f.path, url: `${deps.publicBaseUrl}/${w.org}/${w.world}/${f.path.split("/").map(encodeURIComponent).join("/")}`, roomUrl: toRoomUrl(f) })),
        };
        res.status(200).json(body);
      } finally {
        await spooled.dispose();
      }
    });
  };

  const download: RequestHandler = async (req, res) => {
    const w = worldOf(req);
    await authorize(req, w);
    const directory = parseDirectory(queryParam(req, "directory"));
    const base = directory === "" ? w.world : directory.slice(directory.lastIndexOf("/") + 1);
    // A header value: the name is a slug or a path segment, quotes and controls are replaced.
    const archiveName = `${base.replace(/[^\w.-]/g, "_")}.zip`;
    await sendDirectoryZip(deps.store, directoryPrefix(w.org, w.world, directory), archiveName, res, deps.logger);
  };

  const rooms: RequestHandler = async (req, res) => {
    const w = worldOf(req);
    await authorizeOperatorOrWorld(req, w);
    const summary = await deps.worlds.find(w.org, w.world);
    if (!summary) throw new AppError(404, "unknown-world", `There is no world '${w.org}/${w.world}'.`);
    const rawLimit = queryParam(req, "limit");
    const limit = rawLimit === undefined ? ROOMS_PAGE.default : Number(rawLimit);
    if (!/^\d+$/.test(rawLimit ?? "1") || limit < 1 || limit > ROOMS_PAGE.max) {
      throw new AppError(400, "invalid-parameter", `'limit' is a whole number from 1 to ${ROOMS_PAGE.max}.`, { parameter: "limit" });
    }
    const cursor = queryParam(req, "cursor");
    const after = cursor === undefined ? undefined : decodeCursor(cursor);
    const page = await deps.rooms.list(w.org, w.world, { publicBaseUrl: deps.publicBaseUrl, roomUrl: roomUrlOf(summary.customDomain) }, limit, after);
    res.setHeader("Cache-Control", "no-store");
    res.json(page);
  };

  const router = express.Router({ caseSensitive: true });
  const handlers: Record<string, [string, RequestHandler]> = { ping: ["get", ping], upload: ["post", upload], download: ["get", download], rooms: ["get", rooms] };
  for (const [name, [method, handler]] of Object.entries(handlers)) {
    const allow = TOOL_METHODS[name]!;
    const route = router.route(`/:organization/:world/${name}`);
    (method === "post" ? route.post(handler) : route.get(handler)).options((_req, res) => {
      res.setHeader("Access-Control-Allow-Methods", allow);
      res.setHeader("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.setHeader("Access-Control-Max-Age", "600");
      res.setHeader("Allow", allow);
      res.status(204).end();
    });
    route.all((req) => {
      const write = ["PUT", "PATCH", "DELETE"].includes(req.method);
      throw new AppError(
        405,
        "method-not-allowed",
        write
          ? `'${name}' at a world's root is reserved for map authors' tools (${allow}), so it cannot be written as a file; choose another name.`
          : `${req.method} is not supported on '${name}' (${allow}).`,
        { headers: { Allow: allow } },
      );
    });
  }
  return router;
}
