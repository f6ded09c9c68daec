/** One Temporal namespace per integration test file, registered by the global set-up when the dev server starts. */
import fs from 'node:fs';
import path from 'node:path';

export function testFileNamespace(file: string): string {
  return `it-${path.basename(file).replace(/\.test\.ts$/, '')}`;
}

/** The namespaces of every integration test file in this folder. */
export function allTestNamespaces(): string[] {
  return fs
    .readdirSync(import.meta.dirname)
    .filter((f) => f.endsWith('.test.ts'))
    .map(testFileNamespace);
}
