import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// Served by admin-api under /dashboard/ with a strict Content-Security-Policy (no inline script,
// no other host): one module script, one stylesheet, no inlined assets as data: URLs in scripts.
export default defineConfig({
  base: "/dashboard/",
  plugins: [react()],
  resolve: { conditions: ["development"] },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // Small images/fonts would become data: URLs; keep every asset a real file under 'self'.
    assetsInlineLimit: 0,
    // Vite's module preload polyfill is an inline-free module, but not needed by the browsers we target.
    modulePreload: { polyfill: false },
    target: "es2022",
    reportCompressedSize: true,
  },
});
