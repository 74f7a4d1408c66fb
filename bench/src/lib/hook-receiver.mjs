/**
 * The auth-hook benchmark's receiver, in its own process so its CPU is not the service's: answers
 * every POST 200 after a fixed delay (argv[2] ms, default 2) and records its own answer time per
 * request, from the request's arrival to the end of its answer, in arrival order.
 * Control: `POST /_times` → [[path, ms], ...], `POST /_reset`. Prints `{"port": n}` on stdout once listening.
 */
import http from "node:http";

const delayMs = Number(process.argv[2] ?? 2);
let times = [];

const server = http.createServer((req, res) => {
  const arrived = process.hrtime.bigint();
  if (req.url === "/_times") {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify(times));
    return;
  }
  if (req.url === "/_reset") {
    times = [];
    res.end();
    return;
  }
  req.resume();
  req.on("end", () => {
    setTimeout(() => {
      res.statusCode = 200;
      res.end("ok", () => times.push([req.url, Number(process.hrtime.bigint() - arrived) / 1e6]));
    }, delayMs);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`));
