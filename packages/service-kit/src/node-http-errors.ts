import { randomUUID } from "node:crypto";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { STATUS_TITLES } from "./errors.js";
import type { Logger } from "./logger.js";

/**
 * Problem documents for what Node's HTTP layer refuses before express sees a request (RFC 9457,
 * same shape as the error middleware's): oversized headers 431, a bad `Expect` 417, a request line
 * or header the parser cannot read (unknown method, raw non-ASCII byte in the path, NUL in a
 * header, malformed chunking) 400, a request that took too long to arrive 408. Without this Node
 * answers them with an empty body and no content type.
 */
export function answerNodeHttpErrors(server: Server, logger?: Logger): void {
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => onClientError(err, socket, logger));
  server.on("checkExpectation", (req: IncomingMessage, res: ServerResponse) => {
    const requestId = randomUUID();
    const detail = `Only 'Expect: 100-continue' is supported, not '${String(req.headers.expect).slice(0, 100)}'.`;
    logger?.warn({ requestId, method: req.method, path: req.url?.split("?")[0], status: 417, code: "expectation-failed", detail }, "request");
    const body = problemBody(417, "expectation-failed", detail, req.url?.split("?")[0]);
    res.writeHead(417, { "Content-Type": "application/problem+json", "Content-Length": Buffer.byteLength(body), "X-Request-Id": requestId, Connection: "close" });
    res.end(body);
  });
}

/** Status, problem code and detail for a parser error code of llhttp / Node's HTTP server. */
export function classifyClientError(code: string | undefined): { status: number; code: string; detail: string } {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return { status: 431, code: "headers-too-large", detail: "The request's header section is larger than this server accepts." };
    case "ERR_HTTP_REQUEST_TIMEOUT":
    case "ERR_HTTP_HEADERS_TIMEOUT":
      return { status: 408, code: "request-timeout", detail: "The request did not arrive in time." };
    case "HPE_INVALID_METHOD":
      return { status: 400, code: "malformed-request", detail: "The request method is not one HTTP defines." };
    case "HPE_INVALID_URL":
      return { status: 400, code: "malformed-request", detail: "The request target is not a valid URL path: characters outside ASCII must be percent-encoded." };
    case "HPE_INVALID_HEADER_TOKEN":
    case "HPE_INVALID_CONSTANT":
      return { status: 400, code: "malformed-request", detail: "A header name or value contains a character HTTP does not allow." };
    case "HPE_UNEXPECTED_CONTENT_LENGTH":
    case "HPE_INVALID_CONTENT_LENGTH":
    case "HPE_INVALID_TRANSFER_ENCODING":
    case "HPE_INVALID_CHUNK_SIZE":
      return { status: 400, code: "malformed-request", detail: "The request's body framing (Content-Length or Transfer-Encoding) is invalid." };
    default:
      return { status: 400, code: "malformed-request", detail: "The request could not be parsed as HTTP/1.1." };
  }
}

function onClientError(err: NodeJS.ErrnoException, socket: Duplex, logger: Logger | undefined): void {
  // A reset or an already answered request leaves nothing to answer: close quietly, as Node does.
  const answered = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
  if (err.code === "ECONNRESET" || !socket.writable || answered) {
    socket.destroy();
    return;
  }
  const { status, code, detail } = classifyClientError(err.code);
  const requestId = randomUUID();
  logger?.warn({ requestId, status, code, detail, parserError: err.code }, "request refused by the HTTP parser");
  const body = problemBody(status, code, detail, undefined);
  // An answer to HEAD has no body (RFC 9110, 9.3.2): a client reading one would take the problem
  // document for the next response, or drop the connection. The method is read off the raw bytes,
  // since the parser gave up before it made a request of them.
  const head = isHeadRequest((err as { rawPacket?: unknown }).rawPacket);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TITLES[status] ?? "Bad Request"}\r\n` +
      "Content-Type: application/problem+json\r\n" +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${requestId}\r\n` +
      "Connection: close\r\n\r\n" +
      (head ? "" : body),
  );
}

/** Whether the raw bytes the parser refused begin a HEAD request. */
export function isHeadRequest(rawPacket: unknown): boolean {
  return Buffer.isBuffer(rawPacket) && rawPacket.subarray(0, 5).toString("latin1") === "HEAD ";
}

function problemBody(status: number, code: string, detail: string, instance: string | undefined): string {
  const doc: Record<string, unknown> = { type: `/problems/${code}`, title: STATUS_TITLES[status] ?? "Error", status, detail };
  if (instance !== undefined) doc.instance = instance;
  return JSON.stringify(doc);
}
