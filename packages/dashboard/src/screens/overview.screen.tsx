/** Overview: the world, where its maps live, its endpoints and how deliveries went lately. */
import { useQueries, useQuery } from "@tanstack/react-query";
import { Badge, Loading, ProblemMessage, formatRate } from "../components/ui.js";
import { RoomsCard } from "../components/rooms-card.js";
import { useSession } from "../session-context.js";
import { Link } from "../shell.js";

export function OverviewScreen() {
  const { api } = useSession();
  const world = useQuery({ queryKey: ["world"], queryFn: api.world });
  const endpoints = useQuery({ queryKey: ["endpoints"], queryFn: api.endpoints });

  // roomUrlBase is the world's room prefix (on its custom domain when it has one).
  const roomBase = world.data?.roomUrlBase ?? null;
  // The world's 24 h figures are the sum of its endpoints' rollups (one cheap read each).
  const stats = useQueries({
    queries: (endpoints.data?.items ?? []).map((e) => ({ queryKey: ["stats", e.id], queryFn: () => api.stats(e.id), refetchInterval: 30_000, staleTime: 0 })),
  });
  const statsReady = stats.length > 0 && stats.every((q) => q.data !== undefined);
  const deliveries24h = stats.reduce((n, q) => n + (q.data?.deliveries.total ?? 0), 0);
  const attempts24h = stats.reduce((n, q) => n + (q.data?.attempts.total ?? 0), 0);
  const succeeded24h = stats.reduce((n, q) => n + (q.data?.attempts.succeeded ?? 0), 0);
  const enabled = endpoints.data?.items.filter((e) => e.enabled).length ?? 0;
  const disabled = (endpoints.data?.items.length ?? 0) - enabled;

  return (
    <>
      <h1>Overview</h1>
      <section className="card" aria-labelledby="world-title">
        <h2 id="world-title">World</h2>
        {world.isPending ? <Loading /> : null}
        <ProblemMessage error={world.error} title="Could not load the world" />
        {world.data ? (
          <dl className="facts">
            <dt>Name</dt>
            <dd>{world.data.name}</dd>
            <dt>Organization / world</dt>
            <dd className="mono">
              {world.data.organization}/{world.data.slug}
            </dd>
            <dt>Map-storage base address</dt>
            <dd className="mono break" data-testid="map-storage-url">
              {world.data.mapStorageUrl}
            </dd>
            <dt>Room URL shape</dt>
            <dd className="mono break">
              {roomBase}
              <em>&lt;path&gt;</em>.wam
            </dd>
            <dt>Publish a map</dt>
            <dd>
              From the Map Starter Kit, with an <Link to="/api-keys">API key</Link>:{" "}
              <span className="mono break" data-testid="upload-command">
                npm run upload -- -u {world.data.mapStorageUrl} -k &lt;API key&gt; -d &lt;directory&gt;
              </span>
            </dd>
            <dt>One file</dt>
            <dd className="mono break">
              PUT {world.data.mapStorageUrl}/<em>&lt;path&gt;</em> with <span className="nowrap">Authorization: Bearer &lt;API key&gt;</span>
            </dd>
          </dl>
        ) : null}
      </section>
      <RoomsCard />
      <section className="card" aria-labelledby="endpoints-title">
        <h2 id="endpoints-title">Webhook endpoints</h2>
        {endpoints.isPending ? <Loading /> : null}
        <ProblemMessage error={endpoints.error} title="Could not load the endpoints" />
        {endpoints.data ? (
          endpoints.data.items.length === 0 ? (
            <p>
              No endpoints yet. <Link to="/endpoints">Add one</Link> to receive this world's events.
            </p>
          ) : (
            <div className="stats">
              <div className="stat">
                <span className="stat-value" data-testid="endpoints-enabled">
                  {enabled}
                </span>
                <span className="stat-label">
                  <Badge tone="ok">enabled</Badge>
                </span>
              </div>
              <div className="stat">
                <span className="stat-value" data-testid="endpoints-disabled">
                  {disabled}
                </span>
                <span className="stat-label">
                  <Badge tone={disabled > 0 ? "bad" : "neutral"}>disabled</Badge>
                </span>
              </div>
              <div className="stat">
                <span className="stat-value" data-testid="deliveries-24h">
                  {statsReady ? deliveries24h : "…"}
                </span>
                <span className="stat-label">deliveries, last 24 h</span>
              </div>
              <div className="stat">
                <span className="stat-value" data-testid="success-24h">
                  {statsReady ? formatRate(attempts24h === 0 ? null : succeeded24h / attempts24h) : "…"}
                </span>
                <span className="stat-label">attempts succeeded, 24 h</span>
              </div>
            </div>
          )
        ) : null}
        <p>
          <Link to="/endpoints">Manage endpoints</Link>
        </p>
      </section>
    </>
  );
}
