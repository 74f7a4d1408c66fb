#!/usr/bin/env node
/**
 * `npm run setup` (and the first half of `npm test`): installs the pinned pnpm and the
 * dependencies, then builds what changed (scripts/lib/setup-steps.mjs says how).
 */
import { setupWorkspace } from "./lib/setup-steps.mjs";

await setupWorkspace(process.env);
