/**
 * `npm run bench -- <name> [args]` runs bench/<name>.ts; with no name it lists the benchmarks.
 * Add one by writing bench/<name>.ts with `export async function run(args: string[])` and a line below.
 */
interface Bench {
  run(args: string[]): Promise<unknown>;
}

const BENCHES: Record<string, { about: string; load: () => Promise<Bench> }> = {
  cluster: {
    about: 'reference cluster: guarded writes/s and latency over HTTP vs /healthz, 10k-partition simulation speed, database size',
    load: () => import('./cluster'),
  },
  planner: {
    about: 'planner + move protocol on the stepped simulation: moves, bytes, convergence vs lower bounds and two baselines; plan time at 1,000 nodes / 100,000 partitions and the whole `rebalancer plan --snapshot` command on them (--baseline DIR: beside those of another checkout; --snapshot FILE: keep the topology)',
    load: () => import('./planner'),
  },
  'planner-scale': {
    about: 'the planner alone (no loop, relay or Temporal) at 10,000 nodes / 1,000,000 partitions (--nodes, --partitions): topology JSON size, state and one tick, a plan to convergence, memory',
    load: () => import('./planner-scale'),
  },
  payloads: {
    about: 'every payload the loop hands Temporal (activity inputs and results, continue-as-new) at 1,000 nodes / 100,000 partitions / 1,000 moves in flight, beside the 512 KB Temporal warns at (--nodes, --partitions, --moves, --cooled)',
    load: () => import('./payloads'),
  },
  moves: {
    about: 'N concurrent follower moves (--n 50,200): moves/min, orchestration overhead, history events, worker CPU and RSS, vs a direct baseline',
    load: () => import('./moves'),
  },
  settle: {
    about: 'the product as npm start runs it (default settings): seconds from a node joining, a drain, a node lost for good, a node returning to settled, vs the transfer bound (--timeout-s 900)',
    load: () => import('./settle'),
  },
  scale: {
    about: 'the product as npm start runs it at 1,000 nodes / 100,000 partitions with 10 nodes joining: warm tick and whole-read fallback, status/nodes/moves commands, admin pages, RSS, dashboard, largest event and history; then 200 moves at once for the relay lag and the p99 beside the floor; each beside issue 20\'s targets (--nodes, --partitions, --join, --seconds, --moves; --in-flight N: with about N moves in flight)',
    load: () => import('./scale'),
  },
  handoff: { about: 'planned owner handoffs under publishing load: closed-admission time p50/p99 vs a seal-and-recover of the same partitions', load: () => import('./handoff') },
};

async function main(): Promise<number> {
  const [name, ...args] = process.argv.slice(2).filter((a) => a !== '--');
  const bench = name === undefined ? undefined : BENCHES[name];
  if (bench === undefined) {
    if (name !== undefined) console.error(`unknown benchmark "${name}"`);
    console.log('usage: npm run bench -- <name> [args]\n\nbenchmarks:');
    for (const [n, b] of Object.entries(BENCHES)) console.log(`  ${n.padEnd(10)} ${b.about}`);
    return name === undefined ? 0 : 1;
  }
  await (await bench.load()).run(args);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.stack : err);
    process.exit(1);
  },
);
