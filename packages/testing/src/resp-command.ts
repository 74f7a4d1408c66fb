/**
 * One Redis command on a connection of its own, for the private stores' start-up checks and their
 * tests: no client library, no reconnection, no retries, so a probe answers exactly what the server
 * said at that moment (or fails), which is what a "wait until the cluster is ok" loop needs.
 */
import { connect } from "node:net";

/** A RESP2 reply: simple and bulk strings, integers, nil, arrays of them. */
export type RespReply = string | number | null | RespReply[];

/** Thrown for an error reply (`-ERR ...`, `-LOADING ...`); the message is the server's. */
export class RespError extends Error {
  override name = "RespError";
}

/**
 * Sends one command to the Redis (or Sentinel) listening on `host:port` and resolves with its
 * reply; rejects with a {@link RespError} for an error reply, or with the socket's error, or after
 * `timeoutMs` (default 2 s).
 */
export function redisCommand(port: number, args: readonly (string | number)[], options: { host?: string; timeoutMs?: number } = {}): Promise<RespReply> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: options.host ?? "127.0.0.1", port });
    let buffer = Buffer.alloc(0);
    const finish = (err: Error | null, value?: RespReply): void => {
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(value ?? null);
    };
    const timer = setTimeout(() => finish(new Error(`no answer from 127.0.0.1:${port} to ${String(args[0])} within ${options.timeoutMs ?? 2000} ms`)), options.timeoutMs ?? 2000);
    socket.once("error", (err) => finish(err));
    socket.once("close", () => finish(new Error(`127.0.0.1:${port} closed the connection before answering ${String(args[0])}`)));
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      let parsed: [RespReply | RespError, number] | undefined;
      try {
        parsed = parseReply(buffer, 0);
      } catch (err) {
        finish(err as Error);
        return;
      }
      if (parsed === undefined) return; // incomplete: wait for more bytes
      const [value] = parsed;
      if (value instanceof RespError) finish(value);
      else finish(null, value);
    });
    socket.write(encode(args));
  });
}

function encode(args: readonly (string | number)[]): Buffer {
  const parts = [`*${args.length}\r\n`];
  for (const arg of args) {
    const text = String(arg);
    parts.push(`$${Buffer.byteLength(text)}\r\n${text}\r\n`);
  }
  return Buffer.from(parts.join(""));
}

/** The reply starting at `offset` and the offset after it, or undefined when more bytes are needed. */
function parseReply(buf: Buffer, offset: number): [RespReply | RespError, number] | undefined {
  const lineEnd = buf.indexOf("\r\n", offset);
  if (lineEnd === -1) return undefined;
  const type = String.fromCharCode(buf[offset] ?? 0);
  const line = buf.toString("utf8", offset + 1, lineEnd);
  const next = lineEnd + 2;
  switch (type) {
    case "+":
      return [line, next];
    case "-":
      return [new RespError(line), next];
    case ":":
      return [Number(line), next];
    case "$": {
      const length = Number(line);
      if (length < 0) return [null, next];
      if (buf.length < next + length + 2) return undefined;
      return [buf.toString("utf8", next, next + length), next + length + 2];
    }
    case "*": {
      const count = Number(line);
      if (count < 0) return [null, next];
      const items: RespReply[] = [];
      let at = next;
      for (let i = 0; i < count; i += 1) {
        const item = parseReply(buf, at);
        if (item === undefined) return undefined;
        const [value, after] = item;
        if (value instanceof RespError) throw value;
        items.push(value);
        at = after;
      }
      return [items, at];
    }
    default:
      throw new Error(`unexpected RESP reply type ${JSON.stringify(type)}`);
  }
}

/** `INFO <section>` (or a `CLUSTER INFO`) as a map of its `field:value` lines. */
export function infoFields(text: RespReply): Map<string, string> {
  const fields = new Map<string, string>();
  if (typeof text !== "string") return fields;
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return fields;
}
