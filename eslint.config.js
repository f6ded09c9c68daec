import tseslint from 'typescript-eslint';

/**
 * The folders' layers, ground first (docs/architecture.md): a folder imports only folders on the layers beneath
 * it; the two operator surfaces share a layer and import nothing of each other.
 */
const LAYERS = [['cluster'], ['planner'], ['rules'], ['operations'], ['activities'], ['workflows'], ['worker'], ['client', 'admin'], ['scripts'], ['bench']];

/** The folders `folder` may not import: those on its layer and above. */
function notBeneath(folder) {
  return LAYERS.slice(LAYERS.findIndex((l) => l.includes(folder)))
    .flat()
    .filter((f) => f !== folder);
}

/** What the workflow sandbox lacks: code bundled into it (workflows/, rules/) refuses these. */
const NODE_BUILTINS = [
  { group: ['node:*'], message: 'Node built-ins are not available in workflow code.' },
  { group: ['fs', 'path', 'os', 'http', 'https', 'net', 'child_process', 'crypto', 'worker_threads', 'timers'], message: 'Node built-ins are not available in workflow code.' },
];

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
  // The surfaces: the CLI and the admin API reach Temporal and the broker through operations/, never each other.
  ...layer('admin', notBeneath('admin'), 'The admin API imports only the folders beneath it (operations/ for what the CLI does too), nothing of client/.'),
  ...layer('client', notBeneath('client'), 'The CLI imports only the folders beneath it (operations/ for what the admin API does too), nothing of admin/.'),
  ...layer('worker', notBeneath('worker'), 'The worker imports only the folders beneath it: workflows, activities, operations, rules, the planner and the broker client.'),
  // Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no I/O, only the pure rules and types from the rest.
  ...layer('workflows', notBeneath('workflows'), 'Workflows import nothing of the folders above them (worker, client, admin, scripts, bench).', {
    typesOnly: {
      folders: ['activities', 'cluster', 'operations', 'planner'],
      message: 'Workflows import only types from the folders beneath them but rules/: activities, operations, the contract and the planner run outside the sandbox.',
    },
    extra: NODE_BUILTINS,
  }),
  ...layer('activities', notBeneath('activities'), 'Activities import only the folders beneath them (operations, rules, the planner, the broker): workflows/ imports their types.'),
  // The one library that starts and reads workflows: below activities/, so it knows them only by type name.
  ...layer('operations', notBeneath('operations'), 'operations/ imports only rules/, the planner and the broker: no workflow code (not even types), nothing of its users.'),
  // Bundled into the workflow sandbox and read outside it: pure, like the workflows.
  ...layer('rules', notBeneath('rules'), 'rules/ imports nothing of the folders above it: the rest of the rebalancer builds on it.', {
    typesOnly: { folders: ['cluster', 'planner'], message: 'rules/ imports only types from the contract and the planner: it is bundled into the workflow sandbox.' },
    extra: NODE_BUILTINS,
  }),
  // The pure core: the planner reads the broker contract and nothing that does I/O or runs workflows.
  ...layer('planner', notBeneath('planner'), 'The planner is pure: of the other folders it imports only the broker contract and its check by hand (cluster/contract, cluster/conforming).', { only: { cluster: ['contract', 'conforming'] } }),
  // The reference cluster is the broker's stand-in: it knows nothing of the service that moves its replicas.
  ...layer('cluster', notBeneath('cluster'), 'The reference cluster imports nothing of the rebalancer.'),
);

/**
 * The layer guard of one top-level folder: an import of `forbidden` folders is refused at every depth of the file
 * (a relative path names a top-level folder with as many '../' as the file is deep, so each depth gets its own
 * patterns: '../client' is the rebalancer's client from cluster/main.ts, the cluster's own from cluster/sim/x.ts).
 * `typesOnly`: folders beneath it of which it may import types alone. `only`: folders of which one module alone may
 * be imported.
 */
function layer(folder, forbidden, message, { typesOnly = null, extra = [], only = {} } = {}) {
  return [1, 2, 3, 4].map((depth) => {
    const up = '../'.repeat(depth);
    const names = (folders) => folders.flatMap((f) => [`${up}${f}`, `${up}${f}/*`]);
    const group = names(forbidden);
    for (const [f, modules] of Object.entries(only)) group.push(`${up}${f}/*`, ...[modules].flat().map((m) => `!${up}${f}/${m}`));
    const patterns = [...extra, { group, message }];
    if (typesOnly) patterns.push({ group: names(typesOnly.folders), allowTypeImports: true, message: typesOnly.message });
    return {
      files: [`${folder}/${'*/'.repeat(depth - 1)}*.ts`],
      rules: { 'no-restricted-imports': ['error', { patterns }] },
    };
  });
}
