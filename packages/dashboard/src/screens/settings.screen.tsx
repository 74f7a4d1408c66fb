/**
 * World settings a customer controls from the dashboard: analytics and privacy, and which
 * identity providers expose their access token in `member.connecting`.
 */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useState, type FormEvent } from "react";
import type { AnalyticsCategory, IdentityProvider, WorldAnalytics, WorldResource } from "@vw/contracts";
import { Button, FormProblem, Loading, ProblemMessage } from "../components/ui.js";
import { useCapability, useSession } from "../session-context.js";

const CATEGORIES: Record<AnalyticsCategory, string> = {
  presenceAndSessions: "Presence and sessions (joins, leaves, time spent)",
  collaboration: "Collaboration (meetings, chat, screen sharing)",
  workspaceActions: "Workspace actions (areas, co-websites, map editing)",
  qualityDiagnostics: "Quality diagnostics (media and asset errors)",
};

function SettingsForm({ world }: { world: WorldResource }) {
  const { api } = useSession();
  const queryClient = useQueryClient();
  // World settings are endpoint configuration in the customer's eyes: manage-endpoints (admin-api's choice).
  const manage = useCapability("manage-endpoints");
  const [analytics, setAnalytics] = useState<WorldAnalytics>(world.analytics);
  const [providers, setProviders] = useState<IdentityProvider[]>(world.identityProviders);
  useEffect(() => {
    setAnalytics(world.analytics);
    setProviders(world.identityProviders);
  }, [world]);
  const save = useMutation({
    mutationFn: () => api.updateWorld({ analytics, identityProviders: providers }),
    onSuccess: (w) => queryClient.setQueryData(["world"], w),
  });
  const off = !manage.allowed;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!off) save.mutate();
  };

  return (
    <form onSubmit={submit}>
      <section className="card" aria-labelledby="analytics-title">
        <h2 id="analytics-title">Analytics and privacy</h2>
        <p className="hint">What analytics.batch deliveries contain. Turning a category off drops its events before they are stored or sent.</p>
        <label className="check">
          <input type="checkbox" checked={analytics.enabled} disabled={off} onChange={(e) => setAnalytics({ ...analytics, enabled: e.target.checked })} />
          <span>
            <strong>Analytics enabled</strong> <span className="muted">send analytics.batch deliveries at all</span>
          </span>
        </label>
        <label className="check">
          <input
            type="checkbox"
            checked={analytics.userLevelActivity}
            disabled={off || !analytics.enabled}
            onChange={(e) => setAnalytics({ ...analytics, userLevelActivity: e.target.checked })}
          />
          <span>
            <strong>User-level activity</strong> <span className="muted">off: people appear under pseudonyms and file names are removed</span>
          </span>
        </label>
        <fieldset className="field">
          <legend>Categories</legend>
          {(Object.keys(CATEGORIES) as AnalyticsCategory[]).map((c) => (
            <label key={c} className="check">
              <input
                type="checkbox"
                checked={analytics.categories[c]}
                disabled={off || !analytics.enabled}
                onChange={(e) => setAnalytics({ ...analytics, categories: { ...analytics.categories, [c]: e.target.checked } })}
              />
              <span>{CATEGORIES[c]}</span>
            </label>
          ))}
        </fieldset>
      </section>
      <section className="card" aria-labelledby="idp-title">
        <h2 id="idp-title">Identity providers</h2>
        <p className="hint">
          Only OpenID Connect providers can expose their access token: when on, member.connecting carries the member's token for that provider.
        </p>
        {providers.length === 0 ? <p className="muted">This world has no identity provider configured.</p> : null}
        {providers.map((p, i) => (
          <label key={p.id} className="check">
            <input
              type="checkbox"
              checked={p.exposeAccessToken}
              disabled={off || p.kind !== "openid-connect"}
              onChange={(e) => setProviders(providers.map((q, j) => (j === i ? { ...q, exposeAccessToken: e.target.checked } : q)))}
            />
            <span>
              <strong className="mono">{p.id}</strong> <span className="muted">({p.kind})</span> expose access token
              {p.kind !== "openid-connect" ? <span className="muted"> — not possible for {p.kind}</span> : null}
            </span>
          </label>
        ))}
      </section>
      <FormProblem error={save.error} fields={[]} />
      {save.isSuccess ? <p role="status">Settings saved.</p> : null}
      <Button type="submit" variant="primary" busy={save.isPending} disabledReason={manage.reason}>
        Save settings
      </Button>
    </form>
  );
}

export function SettingsScreen() {
  const { api } = useSession();
  const world = useQuery({ queryKey: ["world"], queryFn: api.world });
  return (
    <>
      <h1>Settings</h1>
      {world.isPending ? <Loading /> : null}
      <ProblemMessage error={world.error} title="Could not load the settings" />
      {world.data ? <SettingsForm world={world.data} /> : null}
    </>
  );
}
