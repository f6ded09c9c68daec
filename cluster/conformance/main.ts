/**
 * `npm run conformance -- --url URL` runs every behaviour case of the broker contract against a running
 * implementation (stepped clock, reference controls, nobody else driving it) and prints PASS/FAIL per case.
 * Without --url it starts an embedded reference cluster of the shape the suite expects and runs against it.
 */
import { Command } from 'commander';
import { ClusterClient } from '../client';
import { SUITE_SHAPE } from './cases';
import { startEmbedded } from './embedded';
import { formatOutcome, runSuite, summary } from './runner';

const program = new Command()
  .name('conformance')
  .description('Run the broker contract conformance suite')
  .option('--url <url>', 'base URL of the implementation; omitted: start an embedded reference cluster')
  .option('--token <token>', 'bearer token, when the implementation requires one')
  .option('--grep <text>', 'run only cases whose name contains this text')
  .parse();

const opts = program.opts<{ url?: string; token?: string; grep?: string }>();

async function main(): Promise<number> {
  const embedded = opts.url === undefined ? await startEmbedded(SUITE_SHAPE) : undefined;
  const url = opts.url ?? embedded!.url;
  try {
    const client = new ClusterClient(url, { token: opts.token });
    const clock = await client.clock();
    if (clock.mode !== 'stepped') {
      console.log(`note: ${url} runs a ${clock.mode} clock; the suite expects a stepped one`);
    }
    const grep = opts.grep;
    const outcomes = await runSuite(client, {
      report: (o) => console.log(formatOutcome(o)),
      filter: (name) => grep === undefined || name.includes(grep),
    });
    const skipped = outcomes.filter((o) => o.status === 'skip').length;
    if (skipped > 0) console.log(`(${skipped} skipped: this topology cannot host them)`);
    console.log(summary(outcomes));
    return outcomes.some((o) => o.status === 'fail') ? 1 : 0;
  } finally {
    await embedded?.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.stack : err);
    process.exit(1);
  },
);
