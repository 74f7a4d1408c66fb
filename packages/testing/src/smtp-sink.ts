/**
 * An SMTP server on 127.0.0.1 that accepts every message and keeps it parsed, standing in for
 * the operator's mail relay in integration tests (`SMTP_URL=smtp://127.0.0.1:<port>`).
 */
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";

/** One message as delivered to the sink. */
export interface SinkMessage {
  from: string;
  to: string[];
  subject: string;
  text: string;
}

/** Undoes quoted-printable transfer encoding (soft line breaks and `=XX` bytes). */
function decodeQuotedPrintable(text: string): string {
  const bytes = text.replace(/=\r?\n/g, "").replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  return Buffer.from(bytes, "latin1").toString("utf8");
}

/** A running sink. */
export interface SmtpSink {
  url: string;
  messages: SinkMessage[];
  /** Resolves once `count` messages have arrived in total. */
  waitFor(count: number, timeoutMs?: number): Promise<SinkMessage[]>;
  close(): Promise<void>;
}

/** Starts the sink on an ephemeral port (no TLS, no auth). */
export async function startSmtpSink(): Promise<SmtpSink> {
  const messages: SinkMessage[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  const server = new SMTPServer({
    disabledCommands: ["AUTH", "STARTTLS"],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("error", (err: Error) => callback(err));
      stream.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        const split = raw.indexOf("\r\n\r\n");
        const head = split === -1 ? raw : raw.slice(0, split);
        const body = split === -1 ? "" : raw.slice(split + 4);
        const subject = /^subject: (.*(?:\r\n[ \t].*)*)/im.exec(head)?.[1]?.replace(/\r\n[ \t]/g, " ") ?? "";
        const quotedPrintable = /content-transfer-encoding: quoted-printable/i.test(head);
        messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          to: session.envelope.rcptTo.map((r) => r.address),
          subject,
          text: quotedPrintable ? decodeQuotedPrintable(body) : body,
        });
          for (const waiter of [...waiters]) {
            if (messages.length >= waiter.count) {
              waiters.splice(waiters.indexOf(waiter), 1);
              waiter.resolve();
            }
          }
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    waitFor(count, timeoutMs = 15_000) {
      if (messages.length >= count) return Promise.resolve(messages.slice());
      return new Promise((resolve, reject) => {
        const waiter = {
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve(messages.slice());
          },
        };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          reject(new Error(`SMTP sink got ${messages.length} messages, expected ${count} within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.push(waiter);
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
