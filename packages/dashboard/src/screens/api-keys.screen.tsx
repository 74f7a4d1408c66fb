/** API keys: list, create (token shown once, with the map-storage base address), revoke. */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useId, useState, type FormEvent } from "react";
import type { CreatedApiKeyResource } from "@vw/contracts";
import { Badge, Button, ConfirmAction, Empty, FieldErrors, FormProblem, Loading, ProblemMessage, SecretOnce, formatTime, hasFieldError } from "../components/ui.js";
import { useCapability, useSession } from "../session-context.js";

export function ApiKeysScreen() {
  const { api } = useSession();
  const queryClient = useQueryClient();
  const manage = useCapability("manage-api-keys");
  const keys = useQuery({ queryKey: ["api-keys"], queryFn: () => api.apiKeys() });
  const [created, setCreated] = useState<CreatedApiKeyResource | null>(null);
  const [name, setName] = useState("");
  const nameId = useId();

  const create = useMutation({
    mutationFn: () => api.createApiKey(name.trim() === "" ? null : name.trim()),
    onSuccess: (key) => {
      setCreated(key);
      setName("");
      void queryClient.invalidateQueries({ queryKey: ["api-keys"] });
    },
  });
  const revoke = useMutation({
    mutationFn: (id: string) => api.revokeApiKey(id),
    onSettled: () => queryClient.invalidateQueries({ queryKey: ["api-keys"] }),
  });

  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (manage.allowed) create.mutate();
  };

  return (
    <>
      <h1>API keys</h1>
      <p className="lead">
        An API key lets your tools write this world's maps and files to map storage (<span className="mono">PUT</span>,{" "}
        <span className="mono">PATCH</span>, <span className="mono">DELETE</span>). Revoking a key stops it at once.
      </p>

      <section className="card" aria-labelledby="create-key-title">
        <h2 id="create-key-title">Create a key</h2>
        {created ? (
          <SecretOnce label={`Token of ${created.name ?? "the new key"}`} value={created.token} onDone={() => setCreated(null)}>
            <p>
              Use it as <span className="mono">Authorization: Bearer &lt;token&gt;</span> against the map-storage base address{" "}
              <span className="mono break" data-testid="created-key-base">
                {created.mapStorageUrl}
              </span>
              .
            </p>
          </SecretOnce>
        ) : (
          <form onSubmit={submit} className="form-row">
            <div className="field grow">
              <label htmlFor={nameId}>Name (optional)</label>
              <input
                id={nameId}
                value={name}
                onChange={(e) => setName(e.target.value)}
                maxLength={100}
                placeholder="CI upload"
                aria-invalid={hasFieldError(create.error, "/name") || undefined}
                aria-describedby={`${nameId}-err`}
                disabled={!manage.allowed}
              />
              <FieldErrors id={`${nameId}-err`} error={create.error} pointer="/name" label="The name" />
            </div>
            <Button type="submit" variant="primary" busy={create.isPending} disabledReason={manage.reason}>
              Create key
            </Button>
          </form>
        )}
        <FormProblem error={create.error} fields={["/name"]} />
      </section>

      <section className="card" aria-labelledby="keys-title">
        <h2 id="keys-title">Keys</h2>
        {keys.isPending ? <Loading /> : null}
        <ProblemMessage error={keys.error} title="Could not load the keys" />
        <ProblemMessage error={revoke.error} title="Could not revoke the key" />
        {keys.data && keys.data.items.length === 0 ? <Empty>No API keys yet.</Empty> : null}
        {keys.data && keys.data.items.length > 0 ? (
          <ul className="rows" aria-label="API keys">
            {keys.data.items.map((key) => (
              <li key={key.id} className="row" data-testid="api-key-row">
                <div className="row-main">
                  <strong>{key.name ?? "Unnamed key"}</strong> <span className="mono">{key.tokenPrefix}…</span>{" "}
                  {key.revokedAt ? <Badge tone="bad">revoked</Badge> : <Badge tone="ok">active</Badge>}
                  <div className="meta">
                    <span>Created {formatTime(key.createdAt)}</span>
                    <span>Last used {key.lastUsedAt ? formatTime(key.lastUsedAt) : "never"}</span>
                    {key.revokedAt ? <span>Revoked {formatTime(key.revokedAt)}</span> : null}
                  </div>
                </div>
                {key.revokedAt ? null : (
                  <ConfirmAction
                    label={`Revoke ${key.name ?? key.tokenPrefix}`}
                    question={<>Revoke this key? Every tool using it is refused from now on. This cannot be undone.</>}
                    confirmLabel="Revoke key"
                    busy={revoke.isPending && revoke.variables === key.id}
                    disabledReason={manage.reason}
                    onConfirm={() => revoke.mutate(key.id)}
                  />
                )}
              </li>
            ))}
          </ul>
        ) : null}
      </section>
    </>
  );
}
