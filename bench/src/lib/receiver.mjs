/**
 * The benchmark's webhook receiver, in its own process so its CPU is not the benchmark's:
 * `/ok/...` answers 200 at once, `/hang/...` never answers, `/slow/...` answers 200 after a second
 * (counted apart, as `slow`), `/limited/...` holds a request 20 ms and answers 200 while fewer than
 * 3 are in flight, 429 at once otherwise (counted as `limitedOk` and `limited429`: an overloaded
 * receiver). For every `/ok` request it records the lag from the envelope's
 * `timestamp` (when the event happened) to its arrival. Control:
 * `GET /_stats` → {count, p50, p99, max, lateSeconds (how many seconds saw a delivery more than 1 s
 * late: one stall, or late all along), firstAt, lastAt, slow, slowInFlight (`/slow` requests not answered
 * yet; not reset), cpuMs (its own CPU time since it started)},
 * `GET /_count` → the count alone (cheap to poll), `POST /_reset`.
 * Prints `{"port": n}` on stdout once listening.
 */
import http from "node:http";

let lags = [];
/** Seconds (of arrival, epoch) in which some delivery arrived more than a second after its event. */
let lateSeconds = new Set();
let firstAt = 0;
let lastAt = 0;
let slow = 0;
let slowInFlight = 0;
/** `/limited`: requests held now, answered 200, answered 429, and the most held at once. */
const LIMIT = 3;
let limitedInFlight = 0;
let limitedOk = 0;
let limited429 = 0;
let limitedMost = 0;

const quantile = (sorted, q) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]);

const server = http.createServer((req, res) => {
  if (req.url === "/_count") {
    // Polled while a run is going: the count alone, so the polling costs the receiver nothing
    // that the raw ceiling's run does not pay (the quantiles sort every lag).
    res.end(String(lags.length));
    return;
  }
  if (req.url === "/_stats") {
    const sorted = Float64Array.from(lags).sort();
    res.setHeader("content-type", "application/json");
    const cpu = process.cpuUsage();
    res.end(
      JSON.stringify({ count: lags.length, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: sorted.length ? sorted[sorted.length - 1] : 0, lateSeconds: lateSeconds.size, firstAt, lastAt, slow, slowInFlight, limitedOk, limited429, limitedMost, cpuMs: (cpu.user + cpu.system) / 1000 }),
    );
    return;
  }
  if (req.url === "/_reset") {
    lags = [];
    lateSeconds = new Set();
    firstAt = 0;
    lastAt = 0;
    slow = 0;
    limitedOk = 0;
    limited429 = 0;
    limitedMost = 0;
    res.end();
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    if (req.url.startsWith("/hang/")) return; // never answered
    if (req.url.startsWith("/limited/")) {
      if (limitedInFlight >= LIMIT) {
        limited429 += 1;
        res.statusCode = 429;
        res.end("too many requests");
        return;
      }
      limitedInFlight += 1;
      limitedMost = Math.max(limitedMost, limitedInFlight);
      setTimeout(() => {
        limitedInFlight -= 1;
        limitedOk += 1;
        res.statusCode = 200;
        res.end("ok");
      }, 20);
      return;
    }
    if (req.url.startsWith("/slow/")) {
      slowInFlight += 1;
      setTimeout(() => {
        slowInFlight -= 1;
        slow += 1;
        res.statusCode = 200;
        res.end("ok");
      }, 1000);
      return;
    }
    const now = Date.now();
    try {
      const { timestamp } = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      const lag = timestamp ? now - Date.parse(timestamp) : 0;
      lags.push(lag);
      if (lag > 1000) lateSeconds.add(Math.floor(now / 1000));
    } catch {
      lags.push(0);
    }
    if (firstAt === 0) firstAt = now;
    lastAt = now;
    res.statusCode = 200;
    res.end("ok");
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`));
