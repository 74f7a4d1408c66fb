/**
 * @vw/dashboard/assets-dir — where `pnpm build` writes the dashboard's static files (index.html
 * and hashed assets). admin-api serves this folder under `/dashboard/`. Plain ESM with no
 * dependency so a service can import it without pulling in React or Vite.
 */
import { fileURLToPath } from "node:url";

/** Absolute path of `packages/dashboard/dist/`. */
export const DASHBOARD_ASSETS_DIR = fileURLToPath(new URL("./dist/", import.meta.url));
