/**
 * An endpoint's custom headers: their names (values are write-only: the API never returns them),
 * an editor that replaces the whole set (a PATCH of `headers`), and removing them all (`{}`).
 * Editing starts from the current names with empty values, since keeping a header means typing
 * its value again.
 */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useId, useState, type FormEvent } from "react";
import type { EndpointResource } from "@vw/contracts";
import { useCapability, useSession } from "../session-context.js";
import { HeadersEditor, headerRow, headersOf, type HeaderRow, type RowProblem } from "./headers-editor.js";
import { Button, ConfirmAction, FormProblem } from "./ui.js";

export function CustomHeadersCard({ endpoint }: { endpoint: EndpointResource }) {
  const { api } = useSession();
  const queryClient = useQueryClient();
  const manage = useCapability("manage-endpoints");
  const id = useId();
  const [rows, setRows] = useState<HeaderRow[] | null>(null);
  const [problems, setProblems] = useState<ReadonlyMap<number, RowProblem>>(new Map());
  const save = useMutation({
    mutationFn: (headers: Record<string, string>) => api.updateEndpoint(endpoint.id, { headers }),
    onSuccess: (e) => {
      queryClient.setQueryData(["endpoint", endpoint.id], e);
      void queryClient.invalidateQueries({ queryKey: ["endpoints"] });
      setRows(null);
    },
  });
  const edit = () => {
    save.reset();
    setProblems(new Map());
    setRows(endpoint.headerNames.length > 0 ? endpoint.headerNames.map((name) => headerRow(name)) : [headerRow()]);
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (rows === null || !manage.allowed) return;
    const checked = headersOf(rows);
    setProblems(checked.problems);
    if (checked.problems.size === 0) save.mutate(checked.headers);
  };
  const names = endpoint.headerNames;
  return (
    <section className="card" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>Custom headers</h2>
      {rows === null ? (
        <>
          <p className="hint">
            Added to every delivery and Test after the platform's own headers; the signature still covers only the body. Values are stored
            encrypted and never shown: the delivery history lists each header with the value [redacted].
          </p>
          {names.length === 0 ? (
            <p data-testid="header-names-empty">No custom headers.</p>
          ) : (
            <ul className="header-names" aria-label="Custom header names" data-testid="header-names">
              {names.map((name) => (
                <li key={name}>
                  <span className="mono">{name}</span> <span className="muted">value hidden</span>
                </li>
              ))}
            </ul>
          )}
          {save.isSuccess ? <p role="status">{names.length === 0 ? "Custom headers removed." : `Saved ${names.length} custom header${names.length === 1 ? "" : "s"}.`}</p> : null}
          <FormProblem error={save.error} fields={[]} />
          <div className="actions">
            <Button onClick={edit} disabledReason={manage.reason}>
              {names.length === 0 ? "Add headers" : "Edit headers"}
            </Button>
            {names.length > 0 ? (
              <ConfirmAction
                label="Remove all headers"
                question="Remove every custom header? Deliveries are sent without them from the next attempt on."
                confirmLabel="Remove headers"
                variant="secondary"
                busy={save.isPending}
                disabledReason={manage.reason}
                onConfirm={() => save.mutate({})}
              />
            ) : null}
          </div>
        </>
      ) : (
        <form onSubmit={submit} noValidate>
          {names.length > 0 ? (
            <p className="warning">Saving replaces every header: type the value of each one you keep, and remove the ones you do not.</p>
          ) : null}
          <HeadersEditor rows={rows} onChange={setRows} error={save.error} problems={problems} disabled={!manage.allowed} legend="Headers to send" />
          <FormProblem error={save.error} fields={["/headers"]} />
          <div className="actions">
            <Button type="submit" variant="primary" busy={save.isPending} disabledReason={manage.reason}>
              Save headers
            </Button>
            <Button onClick={() => setRows(null)}>Cancel</Button>
          </div>
        </form>
      )}
    </section>
  );
}
