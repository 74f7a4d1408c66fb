// A webhook receiver as a customer writes one: verify the signature, then handle the event.
import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";

const webhook = new Webhook(process.env.WEBHOOK_SECRET); // the endpoint's whsec_… secret
const port = Number(process.env.RECEIVER_PORT ?? 4000);

createServer((req, res) => {
  if (req.method !== "POST" || req.url !== "/webhooks") return void res.writeHead(404).end();
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk)).on("end", () => {
    try {
      const event = webhook.verify(Buffer.concat(chunks).toString("utf8"), req.headers);
      console.log(`verified ${event.type} ${event.deliveryId}`);
      res.writeHead(204).end(); // any 2xx within 15 s: delivered
    } catch (err) {
      console.log(`refused: ${err.message}`);
      res.writeHead(400).end(); // a bad signature or timestamp: not retried
    }
  });
}).listen(port, "127.0.0.1", () => console.log(`receiver on http://127.0.0.1:${port}/webhooks`));
