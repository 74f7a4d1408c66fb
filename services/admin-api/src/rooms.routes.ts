import { Router } from "express";
import { AppError } from "@vw/service-kit";
import { limitOf, methodNotAllowed } from "./http-support.js";
import type { MapStorageRooms } from "./map-storage-rooms.js";
import type { WorldsService } from "./worlds.service.js";

const CURSOR_RE = /^[A-Za-z0-9_-]{1,2000}$/;

/** `GET /worlds/{org}/{world}/rooms`: the world's rooms (its `.wam` files), as map-storage lists them. */
export function roomsRouter(worlds: WorldsService, rooms: MapStorageRooms): Router {
  const router = Router({ caseSensitive: true });
  router
    .route("/worlds/:org/:world/rooms")
    .get(async (req, res) => {
      const { org, world } = req.params;
      await worlds.get(org, world); // 404 for a world that does not exist, before map-storage is asked
      const limit = limitOf(req);
      const { cursor } = req.query;
      if (cursor !== undefined && (typeof cursor !== "string" || !CURSOR_RE.test(cursor))) {
        throw new AppError(400, "invalid-parameter", "The query parameter cursor must be the nextCursor of a previous page of this list.", { parameter: "cursor" });
      }
      res.json(await rooms.list(org, world, limit, cursor));
    })
    .all(methodNotAllowed(["GET"]));
  return router;
}
