/** The overview's card of the world's last 24 h: every endpoint's deliveries and attempts together, in one read. */
import { useQuery } from "@tanstack/react-query";
import { useSession } from "../session-context.js";
import { DeliveryFigures } from "./delivery-figures.js";
import { Loading, ProblemMessage } from "./ui.js";

export function WorldDeliveriesCard() {
  const { api } = useSession();
  const stats = useQuery({ queryKey: ["world-stats"], queryFn: api.worldStats, refetchInterval: 30_000, staleTime: 0 });
  return (
    <section className="card" aria-labelledby="world-deliveries-title">
      <h2 id="world-deliveries-title">Deliveries, last 24 hours</h2>
      {stats.isPending ? <Loading label="Loading the figures…" /> : null}
      <ProblemMessage error={stats.error} title="Could not load the figures" />
      {stats.data ? <DeliveryFigures stats={stats.data} /> : null}
    </section>
  );
}
