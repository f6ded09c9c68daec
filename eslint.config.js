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
  {
    // Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no I/O.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['node:*'], message: 'Node built-ins are not available in workflow code.' },
            { group: ['fs', 'path', 'os', 'http', 'https', 'net', 'child_process', 'crypto', 'worker_threads', 'timers'], message: 'Node built-ins are not available in workflow code.' },
            { group: ['../activities', '../activities/*', '../cluster/*', '../worker/*', '../client/*'], allowTypeImports: true, message: 'Workflows import only types from activities and the contract.' },
          ],
        },
      ],
    },
  },
);
