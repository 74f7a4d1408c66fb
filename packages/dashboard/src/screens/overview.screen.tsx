/** Overview: the world, where its maps live, its endpoints and how deliveries went lately. */
import { useQuery } from "@tanstack/react-query";
import { Badge, Loading, ProblemMessage } from "../components/ui.js";
import { RoomsCard } from "../components/rooms-card.js";
import { StorageUse } from "../components/storage-use.js";
import { WorldDeliveriesCard } from "../components/world-deliveries.js";
import { Link } from "../router.js";
import { useSession } from "../session-context.js";

export function OverviewScreen() {
  const { api } = useSession();
  const world = useQuery({ queryKey: ["world"], queryFn: api.world });
  const endpoints = useQuery({ queryKey: ["endpoints"], queryFn: api.endpoints });

  // roomUrlBase is the world's room prefix (on its custom domain when it has one).
  const roomBase = world.data?.roomUrlBase ?? null;
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
            <dt>Storage</dt>
            <dd>
              <StorageUse storage={world.data.storage} />
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
            </div>
          )
        ) : null}
        <p>
          <Link to="/endpoints">Manage endpoints</Link>
        </p>
      </section>
      <WorldDeliveriesCard />
    </>
  );
}
