import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', '.tools/', '.data/', 'dist/', 'coverage/', 'bin/'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  // Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no I/O, only types from the rest.
  ...layer('workflows', ['activities', 'admin', 'bench', 'client', 'cluster', 'planner', 'scripts', 'worker'], 'Workflows import only types from the other folders: activities, the contract and the planner run outside the sandbox.', {
    allowTypeImports: true,
    extra: [
      { group: ['node:*'], message: 'Node built-ins are not available in workflow code.' },
      { group: ['fs', 'path', 'os', 'http', 'https', 'net', 'child_process', 'crypto', 'worker_threads', 'timers'], message: 'Node built-ins are not available in workflow code.' },
    ],
  }),
  // The pure core: the planner reads the broker contract and nothing that does I/O or runs workflows.
  ...layer('planner', ['activities', 'admin', 'bench', 'client', 'scripts', 'worker', 'workflows'], 'The planner is pure: of the other folders it imports only the broker contract (cluster/contract).', { only: { cluster: 'contract' } }),
  // The reference cluster is the broker's stand-in: it knows nothing of the service that moves its replicas.
  ...layer('cluster', ['activities', 'admin', 'bench', 'client', 'planner', 'scripts', 'worker', 'workflows'], 'The reference cluster imports nothing of the rebalancer.'),
);

/**
 * The layer guard of one top-level folder: an import of `forbidden` folders is refused at every depth of the file
 * (a relative path names a top-level folder with as many '../' as the file is deep, so each depth gets its own
 * patterns: '../client' is the rebalancer's client from cluster/main.ts, the cluster's own from cluster/sim/x.ts).
 * `only`: folders of which one module alone may be imported.
 */
function layer(folder, forbidden, message, { allowTypeImports = false, extra = [], only = {} } = {}) {
  return [1, 2, 3, 4].map((depth) => {
    const up = '../'.repeat(depth);
    const group = forbidden.flatMap((f) => [`${up}${f}`, `${up}${f}/*`]);
    for (const [f, module] of Object.entries(only)) group.push(`${up}${f}/*`, `!${up}${f}/${module}`);
    return {
      files: [`${folder}/${'*/'.repeat(depth - 1)}*.ts`],
      rules: { 'no-restricted-imports': ['error', { patterns: [...extra, { group, allowTypeImports, message }] }] },
    };
  });
}
