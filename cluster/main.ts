/**
 * The reference cluster as its own process: `npm run cluster -- --help`. Logs JSON lines (pino) to stdout;
 * the first "cluster listening" line carries the URL, which tests parse.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import pino from 'pino';
import type { DurabilityPolicy } from './contract';
import { startCluster } from './server';
import { defaultConfig, type SimConfig } from './sim/types';

function int(min: number, max: number) {
  return (v: string): number => {
    const n = Number(v);
    if (!/^-?\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected an integer from ${min} to ${max}, got "${v}"`);
    }
    return n;
  };
}

function num(min: number, max: number) {
  return (v: string): number => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected a number from ${min} to ${max}, got "${v}"`);
    }
    return n;
  };
}

function durability(v: string): DurabilityPolicy {
  if (v === 'majority_durable' || v === 'local_durable') return { mode: v };
  const m = /^(replica_durable|replica_accepted):(\d+)$/.exec(v);
  const n = m ? Number(m[2]) : NaN;
  if (m && n >= 1 && n <= 16) return { mode: m[1] as 'replica_durable' | 'replica_accepted', n };
  throw new InvalidArgumentError(
    `expected majority_durable, local_durable, replica_durable:N or replica_accepted:N (N 1-16), got "${v}"`,
  );
}

const d = defaultConfig;
const program = new Command()
  .name('cluster')
  .description(
    'The reference cluster: a simulated queue broker that implements the broker contract over HTTP, with state in SQLite.',
  )
  .option('--port <n>', 'HTTP port (0 picks a free one)', int(0, 65535), 7380)
  .option('--host <addr>', 'listen address; anything but loopback needs --token', '127.0.0.1')
  .option('--token <t>', 'bearer token required on every request (or CLUSTER_TOKEN)')
  .option('--data <dir>', 'data directory (cluster.db); an existing one is resumed', '.data/cluster')
  .option('--nodes <n>', 'nodes n1..nN (new data directory only)', int(1, 1000), 5)
  .option('--partitions <n>', 'queue partitions q-0..q-(M-1) (new data directory only)', int(0, 100_000), 12)
  .option('--streams <n>', 'stream partitions s-0.. (new data directory only)', int(0, 100_000), 1)
  .option('--seed <n>', 'PRNG seed: stepped runs are deterministic for a seed', int(0, 2 ** 32 - 1), d.seed)
  .addOption(new Option('--clock <mode>', 'wall: a timer drives time; stepped: POST /v1/clock/advance').choices(['wall', 'stepped']).default('wall'))
  .option('--rf <n>', 'configured replication factor', int(1, 16), d.replicationFactor)
  .option('--durability <policy>', 'majority_durable | local_durable | replica_durable:N | replica_accepted:N', durability, d.durability)
  .option('--tick-ms <ms>', 'simulated ms per step', int(1, 60_000), d.tickMs)
  .option('--publish-rate <msgs>', 'messages per second per partition', num(0, 1_000_000), d.publishRate)
  .option('--message-bytes <n>', 'bytes per message', int(1, 100_000_000), d.messageBytes)
  .option('--retain-messages <n>', 'messages the owner keeps before truncating (older ones need a checkpoint)', int(1, 1e12), d.retainMessages)
  .option('--initial-messages <n>', 'messages every partition starts with', int(0, 1e12), d.initialMessages)
  .option('--transfer-rate <bytes>', 'learner/rejoin transfer bytes per second per node', num(1, 1e12), d.transferBytesPerSec)
  .option('--follow-rate <msgs>', 'follower replication messages per second per node', num(1, 1e12), d.followMessagesPerSec)
  .option('--catch-up-slack <n>', 'a replica this close to the tail (messages) is caught up', int(0, 1e9), d.catchUpSlack)
  .option('--per-node-limit <n>', 'sync budget: concurrent transfers per node', int(0, 10_000), d.perNodeLimit)
  .option('--cluster-limit <n>', 'sync budget: concurrent transfers cluster-wide', int(0, 1_000_000), d.clusterLimit)
  .option('--recovery-delay-ms <ms>', 'simulated ms from owner failure to activation', int(0, 86_400_000), d.recoveryDelayMs)
  .option('--retain-grace-ms <ms>', 'simulated ms a removed copy is retained', int(0, 1e12), d.retainGraceMs)
  .exitOverride()
  .configureOutput({
    writeErr: (s) => {
      // One clear line for a bad flag; help and version text go to stdout as usual.
      process.stderr.write(`${s.split('\n').find((l) => l.trim() !== '') ?? s}\n`);
    },
  });

/** What commander parses: the simulation's tunables (three under shorter flag names) plus the process's own. */
type Flags = Omit<SimConfig, 'replicationFactor' | 'transferBytesPerSec' | 'followMessagesPerSec'> & {
  port: number;
  host: string;
  token?: string;
  data: string;
  nodes: number;
  partitions: number;
  streams: number;
  clock: 'wall' | 'stepped';
  rf: number;
  transferRate: number;
  followRate: number;
};

async function main(): Promise<void> {
  try {
    program.parse(process.argv);
  } catch (e) {
    const code = (e as { exitCode?: number }).exitCode ?? 2;
    process.exit(code === 0 ? 0 : 2);
  }
  const f = program.opts<Flags>();
  const log = pino({ base: { service: 'cluster' } });
  const token = f.token ?? process.env.CLUSTER_TOKEN;
  try {
    const cluster = await startCluster({
      port: f.port,
      host: f.host,
      ...(token ? { token } : {}),
      data: f.data,
      nodes: f.nodes,
      partitions: f.partitions,
      streams: f.streams,
      clock: f.clock,
      logger: log,
      config: {
        seed: f.seed,
        replicationFactor: f.rf,
        durability: f.durability,
        tickMs: f.tickMs,
        publishRate: f.publishRate,
        messageBytes: f.messageBytes,
        retainMessages: f.retainMessages,
        initialMessages: f.initialMessages,
        transferBytesPerSec: f.transferRate,
        followMessagesPerSec: f.followRate,
        catchUpSlack: f.catchUpSlack,
        perNodeLimit: f.perNodeLimit,
        clusterLimit: f.clusterLimit,
        recoveryDelayMs: f.recoveryDelayMs,
        retainGraceMs: f.retainGraceMs,
      },
    });
    const topo = cluster.sim.topology();
    log.info(
      {
        url: cluster.url,
        data: f.data,
        clock: f.clock,
        resumed: cluster.resumed,
        nodes: topo.nodes.length,
        partitions: topo.partitions.length,
        now: cluster.sim.now,
        seq: cluster.sim.seq,
      },
      cluster.resumed
        ? 'cluster listening (resumed the data directory: its stored nodes, partitions and tunables win over the flags)'
        : 'cluster listening',
    );
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'cluster stopping');
      cluster.close().then(
        () => process.exit(0),
        (err: unknown) => {
          log.error({ err }, 'close failed');
          process.exit(1);
        },
      );
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  } catch (e) {
    process.stderr.write(`cluster: ${(e as Error).message}\n`);
    process.exit(2);
  }
}

await main();
