/**
 * An endpoint's throttle (`rateLimitPerSecond`): most deliveries started per second across all
 * workers, or none. The server's range errors land on the field.
 */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useId, useState, type FormEvent } from "react";
import type { EndpointResource } from "@vw/contracts";
import { useCapability, useSession } from "../session-context.js";
import { Button, FieldErrors, FormProblem, hasFieldError } from "./ui.js";

export function RateLimitForm({ endpoint }: { endpoint: EndpointResource }) {
  const { api } = useSession();
  const queryClient = useQueryClient();
  const manage = useCapability("manage-endpoints");
  const id = useId();
  const [value, setValue] = useState(endpoint.rateLimitPerSecond === null ? "" : String(endpoint.rateLimitPerSecond));
  const save = useMutation({
    // An empty field removes the throttle; anything else goes as typed so the server judges it.
    mutationFn: () => api.updateEndpoint(endpoint.id, { rateLimitPerSecond: value.trim() === "" ? null : Number(value) }),
    onSuccess: (e) => {
      queryClient.setQueryData(["endpoint", endpoint.id], e);
      void queryClient.invalidateQueries({ queryKey: ["endpoints"] });
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (manage.allowed) save.mutate();
  };
  return (
    <section className="card" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>Rate limit</h2>
      <p className="hint">
        Most deliveries started per second for this endpoint, across every delivery worker. Deliveries beyond it wait their turn: nothing is
        dropped. Leave empty for no limit.
      </p>
      <form onSubmit={submit} className="form-row" noValidate>
        <div className="field">
          <label htmlFor={`${id}-rate`}>Deliveries per second</label>
          <input
            id={`${id}-rate`}
            inputMode="numeric"
            value={value}
            onChange={(e) => setValue(e.target.value)}
            placeholder="no limit"
            disabled={!manage.allowed}
            aria-invalid={hasFieldError(save.error, "/rateLimitPerSecond") || undefined}
            aria-describedby={`${id}-rate-err`}
          />
        </div>
        <Button type="submit" busy={save.isPending} disabledReason={manage.reason}>
          Save limit
        </Button>
      </form>
      <FieldErrors id={`${id}-rate-err`} error={save.error} pointer="/rateLimitPerSecond" label="The rate limit" />
      <FormProblem error={save.error} fields={["/rateLimitPerSecond"]} />
      {save.isSuccess ? (
        <p role="status">{save.data.rateLimitPerSecond === null ? "No rate limit." : `Limited to ${save.data.rateLimitPerSecond} per second.`}</p>
      ) : null}
    </section>
  );
}
