import { afterAll, describe, expect, it } from "@jest/globals";
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, spawnService } from "./processes.js";

const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number) as [number, number];

describe("freePort", () => {
  it("hands out distinct ports outside the kernel's ephemeral range, each bindable on every interface", async () => {
    const ports: number[] = [];
    for (let i = 0; i < 20; i += 1) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
    for (const port of ports) {
      expect(port < low || port > high).toBe(true);
      const srv = createServer();
      await new Promise<void>((resolve, reject) => (srv.once("error", reject), srv.listen(port, "0.0.0.0", resolve)));
      await new Promise((resolve) => srv.close(resolve));
    }
  });

  it("skips a port something already listens on", async () => {
    const next = await freePort();
    // Occupy the ports that would come next in this process's block, then ask again. A port some
    // other process holds already (EADDRINUSE) is occupied all the same: it must be skipped too.
    const following = [next + 1, next + 2, next + 3];
    const held = await Promise.all(
      following.map(
        (port) =>
          new Promise<ReturnType<typeof createServer> | undefined>((resolve, reject) => {
            const srv = createServer();
            srv.once("error", (err: NodeJS.ErrnoException) => (err.code === "EADDRINUSE" ? resolve(undefined) : reject(err)));
            srv.listen(port, "127.0.0.1", () => resolve(srv));
          }),
      ),
    );
    try {
      expect(following).not.toContain(await freePort());
    } finally {
      await Promise.all(held.map((srv) => (srv ? new Promise((resolve) => srv.close(resolve)) : Promise.resolve())));
    }
  });
});

describe("spawnService", () => {
  // Inside the workspace, where the services' tsx resolves from.
  const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");
  const dir = mkdtempSync(join(packageDir, ".spawn-test-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("starts the service again on another port when its port was taken before it could bind (EADDRINUSE)", async () => {
    // A service that fails as a taken port makes Node fail the first time, and serves /readyz after.
    mkdirSync(join(dir, "src"));
    const marker = join(dir, "first-start-done");
    writeFileSync(
      join(dir, "src", "main.ts"),
      `import { createServer } from "node:http";
import { existsSync, writeFileSync, appendFileSync } from "node:fs";
const port = Number(process.env.PORT);
appendFileSync(${JSON.stringify(join(dir, "ports"))}, port + "\\n");
if (!existsSync(${JSON.stringify(marker)})) {
  writeFileSync(${JSON.stringify(marker)}, "");
  console.error("Error: listen EADDRINUSE: address already in use 0.0.0.0:" + port);
  process.exit(1);
}
createServer((req, res) => res.end(process.env.SEEN_PORT)).listen(port, "0.0.0.0");
`,
    );
    const service = await spawnService(dir, (port) => ({ SEEN_PORT: String(port) }));
    try {
      const ports = readFileSync(join(dir, "ports"), "utf8").trim().split("\n");
      expect(ports).toHaveLength(2);
      expect(ports[0]).not.toBe(ports[1]);
      expect(service.url).toBe(`http://127.0.0.1:${ports[1]}`);
      // The environment was built for the port the service finally got.
      expect(await (await fetch(`${service.url}/readyz`)).text()).toBe(ports[1]);
    } finally {
      await service.stop();
    }
  });

  it("does not retry on a fixed port, and says why the service exited", async () => {
    const fixedDir = mkdtempSync(join(packageDir, ".spawn-test-fixed-"));
    try {
      mkdirSync(join(fixedDir, "src"));
      writeFileSync(join(fixedDir, "src", "main.ts"), `console.error("Error: listen EADDRINUSE: address already in use"); process.exit(1);\n`);
      const port = await freePort();
      await expect(spawnService(fixedDir, {}, { port })).rejects.toThrow(/exited with 1: .*EADDRINUSE/);
    } finally {
      rmSync(fixedDir, { recursive: true, force: true });
    }
  });

  it("says what /readyz last answered and what the service logged when it never gets ready", async () => {
    const unreadyDir = mkdtempSync(join(packageDir, ".spawn-test-unready-"));
    try {
      mkdirSync(join(unreadyDir, "src"));
      writeFileSync(
        join(unreadyDir, "src", "main.ts"),
        `import { createServer } from "node:http";
console.log(JSON.stringify({ level: 40, msg: "s3 unreachable" }));
createServer((req, res) => { res.statusCode = 503; res.end('{"status":"unavailable","checks":[{"name":"s3","ok":false}]}'); }).listen(Number(process.env.PORT), "0.0.0.0");
`,
      );
      const failure = spawnService(unreadyDir, {}, { readyTimeoutMs: 3000 });
      await expect(failure).rejects.toThrow(/not ready within 3000 ms; last \/readyz: 503 \{"status":"unavailable".*"name":"s3".*stdout \(its log\): .*s3 unreachable/s);
    } finally {
      rmSync(unreadyDir, { recursive: true, force: true });
    }
  });
});
