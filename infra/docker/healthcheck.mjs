// Container health check: exit 0 when GET /readyz on this service's port answers 2xx.
// The port is PORT, else the service's default (the root README's service table).
const DEFAULT_PORTS = { "map-storage": 3001, "event-ingest": 3002, "admin-api": 3003, "delivery-worker": 3004 };
const port = process.env.PORT || DEFAULT_PORTS[process.env.SERVICE ?? ""];
if (!port) {
  console.error("healthcheck: set PORT (or SERVICE to a known service)");
  process.exit(1);
}
try {
  const res = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(4000) });
  process.exit(res.ok ? 0 : 1);
} catch {
  process.exit(1);
}
