/** Endpoints: the list with state and format, and the add form (secret shown once after). */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import type { EndpointWithSecretResource } from "@vw/contracts";
import { EndpointForm } from "../components/endpoint-form.js";
import { EndpointState } from "../components/endpoint-state.js";
import { EndpointStatsLine } from "../components/endpoint-stats.js";
import { Button, Empty, Loading, ProblemMessage, SecretOnce } from "../components/ui.js";
import { VerificationHint } from "../components/verification-hint.js";
import { Link } from "../router.js";
import { useCapability, useSession } from "../session-context.js";

export function EndpointsScreen() {
  const { api } = useSession();
  const queryClient = useQueryClient();
  const manage = useCapability("manage-endpoints");
  const endpoints = useQuery({ queryKey: ["endpoints"], queryFn: api.endpoints });
  const [adding, setAdding] = useState(false);
  const [created, setCreated] = useState<EndpointWithSecretResource | null>(null);
  const create = useMutation({
    mutationFn: api.createEndpoint,
    onSuccess: (endpoint) => {
      setCreated(endpoint);
      setAdding(false);
      void queryClient.invalidateQueries({ queryKey: ["endpoints"] });
    },
  });

  return (
    <>
      <div className="title-row">
        <h1>Endpoints</h1>
        {!adding && !created ? (
          <Button variant="primary" onClick={() => setAdding(true)} disabledReason={manage.reason}>
            Add endpoint
          </Button>
        ) : null}
      </div>
      {adding ? (
        <section className="card" aria-labelledby="add-title">
          <h2 id="add-title">Add an endpoint</h2>
          <EndpointForm
            initial={{ url: "", subscriptions: [] }}
            submitLabel="Create endpoint"
            withHeaders
            onSubmit={(v) => create.mutate(v)}
            error={create.error}
            busy={create.isPending}
            disabledReason={manage.reason}
            onCancel={() => {
              setAdding(false);
              create.reset();
            }}
          />
        </section>
      ) : null}
      {created ? (
        <section className="card">
          <h2>
            Endpoint created: <span className="mono break">{created.url}</span>
          </h2>
          <SecretOnce label="Signing secret" value={created.secret} onDone={() => setCreated(null)}>
            <VerificationHint />
          </SecretOnce>
          <p>
            <Link to={`/endpoints/${created.id}`}>Open the endpoint</Link> to send a test delivery.
          </p>
        </section>
      ) : null}

      <section className="card" aria-labelledby="list-title">
        <h2 id="list-title" className="visually-hidden">
          Endpoint list
        </h2>
        {endpoints.isPending ? <Loading /> : null}
        <ProblemMessage error={endpoints.error} title="Could not load the endpoints" />
        {endpoints.data && endpoints.data.items.length === 0 ? (
          <Empty>No endpoints yet. Add one to receive this world's events as signed webhooks.</Empty>
        ) : null}
        {endpoints.data && endpoints.data.items.length > 0 ? (
          <ul className="rows" aria-label="Endpoints">
            {endpoints.data.items.map((e) => (
              <li key={e.id} className="row" data-testid="endpoint-row">
                <div className="row-main">
                  <Link to={`/endpoints/${e.id}`} className="mono break strong-link">
                    {e.url}
                  </Link>
                  <div className="meta">
                    <EndpointState endpoint={e} />
                    <span>Subscriptions: {e.subscriptions.join(", ")}</span>
                    <span>Format: {e.format}</span>
                    <EndpointStatsLine endpointId={e.id} />
                  </div>
                </div>
              </li>
            ))}
          </ul>
        ) : null}
      </section>
    </>
  );
}
