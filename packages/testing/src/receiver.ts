/**
 * A customer's webhook receiver on 127.0.0.1 for integration tests and benchmarks: it reads the
 * raw body, verifies it with the `standardwebhooks` library exactly as the README tells customers
 * to (raw bytes, lower-case headers, 5-minute tolerance), records every request, and answers what
 * the test decides. Waiting is event-driven (`waitFor`), never a sleep.
 */
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";

/** One request as received. */
export interface ReceivedDelivery {
  at: number;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** The parsed body when the signature verified with the receiver's current secret. */
  verified: unknown;
  /** Why verification failed (null when verified, or when the receiver has no secret). */
  verifyError: string | null;
}

/** What the receiver answers: a status (body "ok"), `"hang"` (never answers) or a custom function. */
export type ReceiverAnswer = number | "hang" | ((req: ReceivedDelivery, res: http.ServerResponse) => void);

/** Options of {@link startWebhookReceiver}. */
export interface WebhookReceiverOptions {
  /** The endpoint's secret as displayed; null to skip verification (legacy endpoints). */
  secret?: string | null;
  /** Answer for each request; changeable later with `answerWith`. Default 204. */
  answer?: ReceiverAnswer;
  /** Serve https with this key and certificate (`selfSignedCertificate`); plain http by default. */
  tls?: { key: string; cert: string };
}

/** A running receiver. */
export interface WebhookReceiver {
  url: string;
  port: number;
  received: ReceivedDelivery[];
  /** Changes the secret used to verify the following requests (after a rotation). */
  setSecret(secret: string | null): void;
  answerWith(answer: ReceiverAnswer): void;
  /** Resolves once `count` requests have arrived in total (rejects after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedDelivery[]>;
  close(): Promise<void>;
}

/** Verifies a received request with `secret` as a customer would; returns the error message, or null when it verifies. */
export function verificationError(secret: string, delivery: Pick<ReceivedDelivery, "body" | "headers">): string | null {
  try {
    new Webhook(secret).verify(delivery.body, delivery.headers as Record<string, string>);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/** Starts a receiver on an ephemeral loopback port. */
export async function startWebhookReceiver(options: WebhookReceiverOptions = {}): Promise<WebhookReceiver> {
  let secret = options.secret ?? null;
  let answer: ReceiverAnswer = options.answer ?? 204;
  const received: ReceivedDelivery[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  const hanging = new Set<http.ServerResponse>();

  const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      let verified: unknown = null;
      let verifyError: string | null = null;
      if (secret !== null) {
        try {
          verified = new Webhook(secret).verify(body, req.headers as Record<string, string>);
        } catch (err) {
          verifyError = (err as Error).message;
        }
      }
      const delivery: ReceivedDelivery = { at: Date.now(), path: req.url ?? "/", headers: req.headers, body, verified, verifyError };
      received.push(delivery);
      for (const waiter of [...waiters]) {
        if (received.length >= waiter.count) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
      if (answer === "hang") {
        hanging.add(res);
        res.on("close", () => hanging.delete(res));
      } else if (typeof answer === "function") {
        answer(delivery, res);
      } else {
        res.statusCode = answer;
        res.end("ok");
      }
    });
  };
  const server = options.tls ? https.createServer(options.tls, handler) : http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `${options.tls ? "https" : "http"}://127.0.0.1:${port}/hook`,
    port,
    received,
    setSecret(next) {
      secret = next;
    },
    answerWith(next) {
      answer = next;
    },
    waitFor(count, timeoutMs = 15_000) {
      if (received.length >= count) return Promise.resolve(received.slice());
      return new Promise((resolve, reject) => {
        const waiter = {
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve(received.slice());
          },
        };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          reject(new Error(`receiver got ${received.length} requests, expected ${count} within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.push(waiter);
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
