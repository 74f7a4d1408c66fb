/**
 * A tiny client-side router over the History API: admin-api answers index.html for every
 * extension-less path under /dashboard/, so screens have real, bookmarkable addresses without a
 * routing library.
 */
import { useSyncExternalStore } from "react";

export const BASE = "/dashboard";

const listeners = new Set<() => void>();
window.addEventListener("popstate", () => listeners.forEach((l) => l()));

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

const snapshot = () => window.location.pathname + window.location.search;

/** Current location relative to {@link BASE} (`/endpoints/abc?status=failed`). */
export function useLocation(): { path: string; search: URLSearchParams } {
  const full = useSyncExternalStore(subscribe, snapshot);
  const url = new URL(full, window.location.origin);
  const path = url.pathname.startsWith(BASE) ? url.pathname.slice(BASE.length) || "/" : "/";
  return { path: path.replace(/\/+$/, "") || "/", search: url.searchParams };
}

/** Goes to `to` (relative to {@link BASE}); `replace` keeps the history entry (filters). */
export function navigate(to: string, options: { replace?: boolean } = {}): void {
  const url = `${BASE}${to}`;
  if (options.replace) window.history.replaceState(null, "", url);
  else window.history.pushState(null, "", url);
  listeners.forEach((l) => l());
  if (!options.replace) window.scrollTo(0, 0);
}

/** Full href of a dashboard path, for real links (middle click, copy address). */
export const href = (to: string) => `${BASE}${to}`;
