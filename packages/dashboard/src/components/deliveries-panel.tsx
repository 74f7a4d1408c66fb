/**
 * An endpoint's deliveries, newest first, each pending one with when it is tried next: filters
 * (status, type, time range), find by deliveryId, cursor pagination (a stack of cursors, so
 * "Previous" works too).
 */
import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { useId, useState, type FormEvent } from "react";
import type { DeliveredEventType, EndpointResource } from "@vw/contracts";
import { ApiError } from "../api/client.js";
import type { DeliveryFilters } from "../api/world-api.js";
import { Link, navigate } from "../router.js";
import { useSession } from "../session-context.js";
import { DELIVERY_STATUS_LIST, DeliveryStatusBadge } from "./delivery-status.js";
import { Button, Empty, Loading, ProblemMessage, formatTime } from "./ui.js";

/** Delivered types (the record type keeps the list complete without importing validators). */
const TYPES: Record<DeliveredEventType, true> = {
  "recording.completed": true,
  "visitor.registered": true,
  "consent.changed": true,
  "analytics.batch": true,
  "member.connecting": true,
  ping: true,
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const timeOfDay = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit", second: "2-digit" });

/** "in 4 minutes", "in 2 hours": how far `at` is from `now`, in the largest unit that fits. */
function fromNow(at: number, now: number): string {
  const seconds = Math.round((at - now) / 1000);
  if (Math.abs(seconds) < 60) return relative.format(seconds, "second");
  const minutes = Math.round(seconds / 60);
  if (Math.abs(minutes) < 60) return relative.format(minutes, "minute");
  const hours = Math.round(minutes / 60);
  return Math.abs(hours) < 48 ? relative.format(hours, "hour") : relative.format(Math.round(hours / 24), "day");
}

/**
 * When a pending delivery is tried next, under its status: the time (the date too when not
 * today) and how far off it is; "due now" once it is due (a worker takes it within moments).
 */
function NextAttempt({ nextAttemptAt, reason }: { nextAttemptAt: string | null; reason?: string | undefined }) {
  if (nextAttemptAt === null) return <span className="next-attempt">queued</span>;
  const at = new Date(nextAttemptAt);
  const now = Date.now();
  if (at.getTime() <= now + 1000) {
    return (
      <span className="next-attempt">
        next attempt <time dateTime={nextAttemptAt}>due now</time>
      </span>
    );
  }
  const sameDay = at.toDateString() === new Date(now).toDateString();
  return (
    <span className="next-attempt" data-testid="next-attempt">
      next attempt <time dateTime={nextAttemptAt}>{sameDay ? timeOfDay.format(at) : formatTime(nextAttemptAt)}</time> ({fromNow(at.getTime(), now)})
      {reason === undefined ? null : <span className="next-attempt-reason">: {reason}</span>}
    </span>
  );
}

/** `datetime-local` value (local time, no zone) to RFC 3339, or undefined when empty. */
const toIso = (local: string) => (local === "" ? undefined : new Date(local).toISOString());

export function DeliveriesPanel({ endpoint }: { endpoint: EndpointResource }) {
  const { api } = useSession();
  const id = useId();
  const [draft, setDraft] = useState({ status: "", type: "", since: "", until: "" });
  const [filters, setFilters] = useState<DeliveryFilters>({});
  const [cursors, setCursors] = useState<string[]>([]);
  const [find, setFind] = useState("");
  const [findError, setFindError] = useState<unknown>(null);
  const cursor = cursors[cursors.length - 1];
  const page = useQuery({
    queryKey: ["deliveries", endpoint.id, filters, cursor],
    queryFn: () => api.deliveries(endpoint.id, { ...filters, ...(cursor ? { cursor } : {}) }),
    placeholderData: keepPreviousData,
    refetchInterval: 5_000,
  });

  const apply = (e: FormEvent) => {
    e.preventDefault();
    const next: DeliveryFilters = {};
    if (draft.status) next.status = draft.status;
    if (draft.type) next.type = draft.type;
    const since = toIso(draft.since);
    const until = toIso(draft.until);
    if (since) next.since = since;
    if (until) next.until = until;
    setFilters(next);
    setCursors([]);
  };
  const lookup = async (e: FormEvent) => {
    e.preventDefault();
    const wanted = find.trim();
    if (wanted === "") return;
    setFindError(null);
    // A deliveryId opens the delivery; anything else (or an unknown id) is searched as the
    // producer's event id, whose deliveries to this endpoint the list then shows.
    if (UUID.test(wanted)) {
      try {
        const d = await api.delivery(endpoint.id, wanted);
        navigate(`/endpoints/${endpoint.id}/deliveries/${d.deliveryId}`);
        return;
      } catch (error) {
        if (!(error instanceof ApiError && error.status === 404)) {
          setFindError(error);
          return;
        }
      }
    }
    setFilters({ eventId: wanted });
    setCursors([]);
  };

  return (
    <section className="card" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>Deliveries</h2>
      <form onSubmit={(e) => void lookup(e)} className="form-row" role="search" aria-label="Find a delivery">
        <div className="field grow">
          <label htmlFor={`${id}-find`}>Find by delivery id or event id</label>
          <input id={`${id}-find`} className="mono" value={find} onChange={(e) => setFind(e.target.value)} placeholder="deliveryId or your event id" />
        </div>
        <Button type="submit">Find</Button>
      </form>
      <ProblemMessage error={findError} title="Could not look it up" />
      {filters.eventId ? (
        <p role="status" data-testid="event-filter">
          Deliveries of event <span className="mono break">{filters.eventId}</span>{" "}
          <Button
            onClick={() => {
              setFilters({});
              setCursors([]);
            }}
          >
            Show all
          </Button>
        </p>
      ) : null}
      <form onSubmit={apply} className="filters" aria-label="Filter deliveries">
        <div className="field">
          <label htmlFor={`${id}-status`}>Status</label>
          <select id={`${id}-status`} value={draft.status} onChange={(e) => setDraft({ ...draft, status: e.target.value })}>
            <option value="">any</option>
            {DELIVERY_STATUS_LIST.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor={`${id}-type`}>Type</label>
          <select id={`${id}-type`} value={draft.type} onChange={(e) => setDraft({ ...draft, type: e.target.value })}>
            <option value="">any</option>
            {Object.keys(TYPES).map((t) => (
              <option key={t}>{t}</option>
            ))}
          </select>
        </div>
        <div className="field field-date">
          <label htmlFor={`${id}-since`}>From</label>
          <input id={`${id}-since`} type="datetime-local" value={draft.since} onChange={(e) => setDraft({ ...draft, since: e.target.value })} />
        </div>
        <div className="field field-date">
          <label htmlFor={`${id}-until`}>To</label>
          <input id={`${id}-until`} type="datetime-local" value={draft.until} onChange={(e) => setDraft({ ...draft, until: e.target.value })} />
        </div>
        <Button type="submit">Apply filters</Button>
      </form>

      {page.isPending ? <Loading /> : null}
      <ProblemMessage error={page.error} title="Could not load the deliveries" />
      {page.data && page.data.items.length === 0 ? (
        <Empty>{Object.keys(filters).length > 0 ? "No delivery matches these filters." : "No deliveries yet. Send a test, or wait for an event."}</Empty>
      ) : null}
      {page.data && page.data.items.length > 0 ? (
        <div className="table-wrap">
          <table className="table stack" data-testid="deliveries-table">
            <caption className="visually-hidden">Deliveries, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Type</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last HTTP</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {page.data.items.map((d) => (
                <tr key={d.deliveryId} data-testid="delivery-row">
                  <td data-label="Type">
                    <Link to={`/endpoints/${endpoint.id}/deliveries/${d.deliveryId}`}>{d.type}</Link>
                    {d.test ? <span className="muted"> (test)</span> : null}
                  </td>
                  <td data-label="Status">
                    <DeliveryStatusBadge status={d.status} />
                    {d.status === "pending" ? <NextAttempt nextAttemptAt={d.nextAttemptAt} reason={d.nextAttemptReason} /> : null}
                  </td>
                  <td data-label="Attempts">{d.attemptCount}</td>
                  <td data-label="Last HTTP">{d.lastStatus ?? "—"}</td>
                  <td data-label="Created" className="nowrap">
                    {formatTime(d.createdAt)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      <div className="actions pager">
        <Button onClick={() => setCursors((c) => c.slice(0, -1))} disabled={cursors.length === 0}>
          Newer
        </Button>
        <Button onClick={() => page.data?.nextCursor && setCursors((c) => [...c, page.data.nextCursor!])} disabled={!page.data?.nextCursor}>
          Older
        </Button>
      </div>
    </section>
  );
}
