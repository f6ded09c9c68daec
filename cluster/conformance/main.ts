/**
 * `npm run conformance -- --url URL` runs the broker contract's behaviour cases against a running broker and
 * prints PASS/SKIP/FAIL per case. It reads which test controls the broker offers (GET /v1/controls) and skips,
 * with the reason, the cases that need one it lacks; it works only on partitions and nodes it creates for
 * itself, and refuses a broker that holds others unless --allow-shared (or --read-only, which runs only the
 * cases that need nothing but the contract's reads). Without --url it starts an empty embedded reference
 * cluster with a stepped clock.
 */
import { Command } from 'commander';
import { ClusterClient } from '../client';
import { startEmbedded } from './embedded';
import { SharedBrokerError, formatOutcome, runSuite, summary } from './runner';

const program = new Command()
  .name('conformance')
  .description('Run the broker contract conformance suite')
  .option('--url <url>', 'base URL of the broker; omitted: start an embedded reference cluster')
  .option('--token <token>', 'bearer token, when the broker requires one')
  .option('--grep <text>', 'run only cases whose name contains this text')
  .option('--allow-shared', 'run beside partitions the suite did not create (it touches only its own)', false)
  .option('--read-only', 'run only the cases that need nothing but the contract\'s reads', false)
  .parse();

const opts = program.opts<{ url?: string; token?: string; grep?: string; allowShared: boolean; readOnly: boolean }>();

async function main(): Promise<number> {
  const embedded = opts.url === undefined ? await startEmbedded() : undefined;
  const url = opts.url ?? embedded!.url;
  try {
    const client = new ClusterClient(url, { token: opts.token });
    const controls = await client.controls();
    console.log(
      controls === null
        ? `${url} offers no test controls: wall clock, cases that need a control are skipped`
        : `${url} runs a ${controls.clock} clock and offers the test controls ${controls.offered.join(', ')}`,
    );
    const grep = opts.grep;
    const outcomes = await runSuite(client, {
      allowShared: opts.allowShared,
      readOnly: opts.readOnly,
      report: (o) => console.log(formatOutcome(o)),
      filter: (name) => grep === undefined || name.includes(grep),
    });
    console.log(`${summary(outcomes)} (${controls?.clock ?? 'wall'} clock)`);
    return outcomes.some((o) => o.status === 'fail') ? 1 : 0;
  } catch (err) {
    if (err instanceof SharedBrokerError) {
      console.error(err.message);
      return 2;
    }
    throw err;
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
