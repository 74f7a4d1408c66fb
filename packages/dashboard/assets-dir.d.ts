/** Absolute path of `packages/dashboard/dist/` (the built dashboard, served under `/dashboard/`). */
export declare const DASHBOARD_ASSETS_DIR: string;
