/** One endpoint: settings, state, secret, format, Test, deliveries and recover. */
import { useQuery } from "@tanstack/react-query";
import { DeliveriesPanel } from "../components/deliveries-panel.js";
import { EndpointSettings } from "../components/endpoint-settings.js";
import { EndpointState } from "../components/endpoint-state.js";
import { EndpointStatsPanel } from "../components/endpoint-stats.js";
import { EndpointTestPanel } from "../components/endpoint-test-panel.js";
import { RecoverPanel } from "../components/recover-panel.js";
import { Loading, ProblemMessage, formatTime } from "../components/ui.js";
import { Link } from "../router.js";
import { useSession } from "../session-context.js";

export function EndpointScreen({ id }: { id: string }) {
  const { api } = useSession();
  const endpoint = useQuery({ queryKey: ["endpoint", id], queryFn: () => api.endpoint(id) });

  return (
    <>
      <p className="breadcrumb">
        <Link to="/endpoints">← Endpoints</Link>
      </p>
      {endpoint.isPending ? <Loading /> : null}
      <ProblemMessage error={endpoint.error} title="Could not load the endpoint" />
      {endpoint.data ? (
        <>
          <h1 className="mono break" data-testid="endpoint-title">
            {endpoint.data.url}
          </h1>
          <div className="meta page-meta">
            <EndpointState endpoint={endpoint.data} />
            <span>Format: {endpoint.data.format}</span>
            <span>Rate limit: {endpoint.data.rateLimitPerSecond === null ? "none" : `${endpoint.data.rateLimitPerSecond}/s`}</span>
            <span>Custom headers: {endpoint.data.headerNames.length === 0 ? "none" : endpoint.data.headerNames.join(", ")}</span>
            <span>API version {endpoint.data.apiVersion}</span>
            <span>Created {formatTime(endpoint.data.createdAt)}</span>
          </div>
          <EndpointStatsPanel endpointId={endpoint.data.id} />
          <EndpointTestPanel endpoint={endpoint.data} />
          <DeliveriesPanel endpoint={endpoint.data} />
          <RecoverPanel endpoint={endpoint.data} />
          <EndpointSettings endpoint={endpoint.data} />
        </>
      ) : null}
    </>
  );
}
