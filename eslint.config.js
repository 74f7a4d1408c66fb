// Type-aware lint of every package, run by `npm test` before the suite (scripts/test.mjs): a
// promise nobody observes ends a Node process when it rejects (delivery-worker died that way on a
// PostgreSQL restart), and a promise handed to something that expects a plain value is never
// awaited. Only those rules: the compiler's strict options cover the rest.
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: ["**/dist/**", "**/*.d.ts", "**/node_modules/**", "**/generated/**", ".dev-data/**", "artifacts/**", "**/*.js", "**/*.mjs", "**/*.cjs", "packages/dashboard/public/**"],
  },
  {
    files: ["**/*.ts", "**/*.tsx"],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { "@typescript-eslint": tseslint.plugin },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
    },
  },
);
