/** One jest run for the whole workspace: ESM, TypeScript through @swc/jest, workspace packages from src. */
export default {
  testEnvironment: "node",
  roots: ["<rootDir>/services", "<rootDir>/packages", "<rootDir>/scripts", "<rootDir>/infra", "<rootDir>/bench"],
  testMatch: ["**/src/**/*.test.ts", "**/test/**/*.test.ts"],
  // scripts/test: the root scripts (dev, setup) exercised as a newcomer runs them.
  testPathIgnorePatterns: ["/node_modules/", "/dist/"],
  extensionsToTreatAsEsm: [".ts"],
  moduleNameMapper: { "^(\\.{1,2}/.*)\\.js$": "$1" },
  transform: {
    "^.+\\.ts$": [
      "@swc/jest",
      {
        jsc: { target: "es2022", parser: { syntax: "typescript" } },
        module: { type: "es6" },
      },
    ],
  },
  testEnvironmentOptions: { customExportConditions: ["development", "node", "node-addons"] },
  globalSetup: "<rootDir>/test/global-setup.js",
  globalTeardown: "<rootDir>/test/global-teardown.js",
  testTimeout: 30000,
  maxWorkers: 2,
};
