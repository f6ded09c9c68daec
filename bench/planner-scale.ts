/**
 * `npm run bench -- planner-scale [--nodes N] [--partitions P]`: the planner alone (a part: no loop, no relay, no
 * Temporal, no broker) on a topology built in memory, by default 10,000 nodes and 1,000,000 partitions with 1% of the
 * nodes joining. Prints what docs/scale.md extrapolates from: the JSON the topology would take against V8's longest
 * string, the planner's state and one tick, a plan to convergence, and the memory each leaves.
 */
import { DEFAULT_PLANNER_CONFIG, planNow, planToConvergence } from '../planner';
import { large } from './planner';
import { round } from './stats';

/** V8's longest string: a JSON document past it cannot be read into one. */
const MAX_STRING = (1 << 29) - 24;

const mib = (x: number): number => round(x / 2 ** 20, 0);
const memory = () => ({ rssMiB: mib(process.memoryUsage().rss), heapMiB: mib(process.memoryUsage().heapUsed) });

export async function run(args: string[]): Promise<void> {
  const value = (flag: string, fallback: number): number => (args.includes(flag) ? Number(args[args.indexOf(flag) + 1]) : fallback);
  const nodes = value('--nodes', 10_000);
  const partitions = value('--partitions', 1_000_000);
  let t0 = performance.now();
  const topology = large(nodes, partitions);
  const built = { ms: round(performance.now() - t0, 0), ...memory() };
  // One partition's JSON times the count: the body of GET /v1/topology, without building the string.
  const perPartition = JSON.stringify(topology.partitions[Math.floor(partitions / 2)]).length + 1;
  const jsonBytes = perPartition * partitions + JSON.stringify(topology.nodes).length;
  const input = { topology, inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: 0 };
  const config = { ...DEFAULT_PLANNER_CONFIG, maxTransfersPerCluster: 200 };
  const ticks: number[] = [];
  for (let i = 0; i < 3; i++) {
    t0 = performance.now();
    planNow(input, config);
    ticks.push(round(performance.now() - t0, 0));
  }
  t0 = performance.now();
  const plan = planToConvergence(input, DEFAULT_PLANNER_CONFIG);
  console.log(
    JSON.stringify({
      scenario: `planner-${nodes}-nodes-${partitions}-partitions`,
      part: 'the planner alone, in one process: no loop, relay, Temporal or broker',
      built,
      topologyJson: { mib: mib(jsonBytes), bytesPerPartition: perPartition, fitsOneString: jsonBytes <= MAX_STRING, maxStringMiB: mib(MAX_STRING) },
      stateAndOneTickMs: ticks,
      fullPlan: { ms: round(performance.now() - t0, 0), steps: plan.steps.length },
      ...memory(),
    }),
  );
}
