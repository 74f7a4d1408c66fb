import type { RequestHandler } from "express";
import type { Logger } from "@vw/service-kit";

/**
 * A client that stops reading a GET is disconnected after `ms` without progress: the socket's idle
 * timer, reset by every write that completes, is armed for reads (whose answers can be whole
 * files), so a paused reader holds its connection and its S3 stream for `ms` at most, never
 * forever. After the answer, Node's keep-alive timer takes the socket over as usual. Requests with
 * a body are bounded by REQUEST_TIMEOUT_MS instead, and are answered small documents.
 */
export function sendTimeout(ms: number, logger: Logger): RequestHandler {
  return (req, res, next) => {
    if (req.method !== "GET" && req.method !== "HEAD") {
      next();
      return;
    }
    req.socket.setTimeout(ms);
    // A listener on the response replaces Node's default (destroy the socket): do it, and say why.
    res.once("timeout", (socket: { destroy(): void }) => {
      logger.info({ path: req.path, sendTimeoutMs: ms }, "send timeout: the client stopped reading; connection closed");
      socket.destroy();
    });
    next();
  };
}
