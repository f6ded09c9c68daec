import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'forks',
    // CI reads the JSON report to print one plain closing line of counts.
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: { json: '.data/test-results.json' },
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/cluster/**/*.test.ts'],
          pool: 'forks',
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          pool: 'forks',
          globalSetup: ['test/integration/temporal-global-setup.ts'],
          testTimeout: 300_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
