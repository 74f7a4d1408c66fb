import type { RequestHandler } from "express";
import type { Logger } from "@vw/service-kit";

/**
 * A client that stops reading a GET is disconnected after `ms` without progress: the socket's idle
 * timer, reset by every write that completes, is armed for reads (whose answers can be whole
 * files), so a paused reader holds its connection and its S3 stream for `ms` at most, never
 * forever. The timer starts with the answer's headers: the time the service takes to prepare an
 * answer (a room listing parsing its rooms, S3's first byte) is not the client's to be cut for.
 * After the answer, Node's keep-alive timer takes the socket over as usual. Requests with a body
 * are bounded by REQUEST_TIMEOUT_MS instead, and are answered small documents.
 */
export function sendTimeout(ms: number, logger: Logger): RequestHandler {
  return (req, res, next) => {
    if (req.method !== "GET" && req.method !== "HEAD") {
      next();
      return;
    }
    // Every answer passes writeHead (explicitly, or implicitly at its first write).
    const writeHead = res.writeHead;
    res.writeHead = function armed(this: typeof res, ...args: Parameters<typeof writeHead>) {
      res.writeHead = writeHead;
      req.socket.setTimeout(ms);
      return writeHead.apply(this, args);
    } as typeof writeHead;
    // A listener on the response replaces Node's default (destroy the socket): do it, and say why.
    res.once("timeout", (socket: { destroy(): void }) => {
      logger.info({ path: req.path, sendTimeoutMs: ms }, "send timeout: the client stopped reading; connection closed");
      socket.destroy();
    });
    next();
  };
}
