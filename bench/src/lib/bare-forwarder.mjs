/**
 * The auth-hook benchmark's floor: a bare node:http forwarder in its own process. It reads the
 * caller's JSON, POSTs one body of a hook delivery's size (argv[3] bytes) with signature-sized
 * headers to argv[2] over a keep-alive agent, and answers `{results: [{status}]}`. No auth, no
 * validation, no lookup, no signing, no history: what any service that sits between the caller
 * and the receiver pays at least on this machine. Prints `{"port": n}` on stdout once listening.
 */
import http from "node:http";

const target = process.argv[2];
const bodySize = Number(process.argv[3] ?? 600);
const agent = new http.Agent({ keepAlive: true });
const body = Buffer.from(JSON.stringify({ padding: "x".repeat(Math.max(0, bodySize - 15)) }));
const headers = {
  "content-type": "application/json",
  "content-length": String(body.length),
  "webhook-id": "0b9f7f0e-7b8a-4d5e-9b51-2f1f0c8d9e11",
  "webhook-timestamp": "1700000000",
  "webhook-signature": `v1,${"A".repeat(44)}`,
  "user-agent": "vw-webhooks/1.0",
};

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const out = http.request(target, { method: "POST", agent, headers }, (answer) => {
      answer.resume();
      answer.on("end", () => {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ results: [{ status: answer.statusCode }] }));
      });
    });
    out.end(body);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`));
