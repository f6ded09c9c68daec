/**
 * `npm run bench -- settle [join|drain|lost|return ...] [--timeout-s N]`: how long the product as it ships takes to
 * settle after a change, end to end. For each trigger, on a fresh balanced cluster: the wall-clock reference
 * cluster as its own process, then `npm start`'s own process pointed at it (its Temporal dev server, the worker
 * with the progress relay and the rebalancer loop at the default REBALANCER_* settings, the admin API), the
 * trigger made as an operator makes it (the cluster's API, the `rebalancer` CLI), and a sample every second
 * until settled (bench/settle-rules.ts) or the timeout. One JSON line per trigger on stdout, a summary on stderr.
 */
import { rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { drainStatus, rebalancerStatus } from '../operations/rebalancer';
import type { Topology } from '../cluster/contract';
import { planNow, planToConvergence, scoreNodes, zoneBoundNodes, type InFlightMove, type PlanInput, type PlannerConfig, type Proposal } from '../planner';
import type { Cooldowns, DrainStatus, RebalancerStatus, TrackedMove } from '../rules/definitions';
import { lowerBounds } from './planner';
import { activityOf, busiestReceiver, repairSteps, targetMs, transferBoundMs, unsettledReasons, withoutCooldowns, withoutLimits, type Activity } from './settle-rules';
import { cli, startProduct, type Product } from './product';
import { round } from './stats';

type Trigger = 'join' | 'drain' | 'lost' | 'return';
const TRIGGERS: Trigger[] = ['join', 'drain', 'lost', 'return'];

/**
 * `npm start`'s embedded cluster (scripts/start.ts: 5 nodes in three zones, 14 queues and a stream of 3 copies, 9
 * copies and 3 owners on each node) with 30,000 messages of history: a copy takes about 7.5 s at 4 MiB/s.
 */
const CLUSTER_SHAPE = { clock: 'wall', nodes: 5, partitions: 14, streams: 1, 'initial-messages': 30_000 };
const JOINING = { id: 'n6', zone: 'z3' };
const SAMPLE_MS = 1000;
const BALANCED_TIMEOUT_MS = 60_000;
const DEFAULT_TIMEOUT_S = 900;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const say = (line: string) => process.stderr.write(`settle: ${line}\n`);

/** A node that holds no stream copy: nothing may move a stream copy yet, so a drain or a repair of it could not end. */
function queueOnlyNode(t: Topology): string {
  const streams = new Set(t.partitions.filter((p) => p.kind === 'stream').flatMap((p) => [p.owner, ...p.followers, ...p.learners]));
  const pick = [...t.nodes].reverse().find((n) => n.live && !streams.has(n.id));
  if (pick === undefined) throw new Error('every node holds a stream copy: no node can be drained or lost with a chance to settle');
  return pick.id;
}

interface Observed {
  status: RebalancerStatus;
  drain: DrainStatus | null;
  topology: Topology;
  now: number;
}

async function observe(p: Product, drained: string | null): Promise<Observed> {
  const [status, drain, topology] = await Promise.all([
    rebalancerStatus(p.client, p.scope),
    drained === null ? null : drainStatus(p.client, drained).catch(() => null),
    p.cluster.topology(),
  ]);
  return { status, drain, topology, now: Date.now() };
}

const tracked = (o: Observed): TrackedMove[] => [...o.status.inFlight, ...(o.drain?.inFlight ?? [])];

function mergedCooldowns(o: Observed): Cooldowns {
  const out: Cooldowns = { nodes: { ...o.status.cooldowns.nodes }, partitions: { ...o.status.cooldowns.partitions } };
  for (const kind of ['nodes', 'partitions'] as const) {
    for (const [id, until] of Object.entries(o.drain?.cooldowns[kind] ?? {})) out[kind][id] = Math.max(out[kind][id] ?? 0, until);
  }
  return out;
}

function planInput(o: Observed, draining: string[]): PlanInput {
  const inFlight: InFlightMove[] = tracked(o).map((m) => ({ partition: m.partition, op: m.op, from: m.from, to: m.to, bytesRemaining: m.bytes }));
  return { topology: o.topology, inFlight, cooldowns: mergedCooldowns(o), now: o.now, draining };
}

/** Reconfigurations running: the ones the loop and a drain track, and a drain that has not ended. */
const running = (o: Observed): number => tracked(o).length + (o.drain !== null && o.drain.outcome === null ? 1 : 0);

/**
 * What keeps the product from settled. At rest (nothing running, and the planner would start nothing even without
 * cooldowns and transfer limits), a node the zone rule keeps above the band is the cluster's limit, not work left:
 * `limit` lists those nodes with the planner's reason.
 */
function unsettled(o: Observed, cfg: PlannerConfig, draining: string[]): { why: string[]; limit: { node: string; reason: string }[] } {
  const input: PlanInput = { topology: o.topology, inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: o.now, draining };
  const scores = scoreNodes(input, cfg);
  const atRest = running(o) === 0 && planNow(input, withoutLimits(cfg)).steps.length === 0;
  const limit = atRest ? zoneBoundNodes(input, cfg) : [];
  return { why: unsettledReasons(o.topology, scores, cfg.threshold, running(o), new Set(limit.map((b) => b.node))), limit };
}

function activity(o: Observed, cfg: PlannerConfig, draining: string[]): Activity {
  const input = planInput(o, draining);
  // A pending recovery is not a copy in flight: the loop waits for it, which the plans below show as blocked.
  const copies = o.topology.partitions.reduce((a, p) => a + p.learners.length + (p.leaving === null ? 0 : 1) + (p.admission === 'open' && p.boundary === null ? 0 : 1), 0);
  const inFlight = tracked(o).length + copies;
  return activityOf({
    inFlight,
    proposedNow: planNow(input, cfg).steps.length,
    proposedUnlimited: planNow(input, withoutLimits(cfg)).steps.length,
    // The cooldowns the planner obeys are the ones recorded in its input; the settings only make new ones.
    proposedWithoutCooldowns: planNow({ ...input, cooldowns: { nodes: {}, partitions: {} } }, cfg).steps.length,
  });
}

/** What happened to the copies between two samples: copies started on a node, owner changes (handoff or recovery). */
class Tally {
  readonly copies = new Set<string>();
  handoffs = 0;
  failovers = 0;
  readonly plannedBytes = new Map<string, number>();
  readonly historyBytes = new Map<string, number>();
  readonly seconds: Record<Activity, number> = { moving: 0, syncBudget: 0, tick: 0, cooldown: 0, blocked: 0 };
  readonly idle = new Map<string, number>();

  see(before: Observed, after: Observed, act: Activity): void {
    const dt = (after.now - before.now) / 1000;
    this.seconds[act] += dt;
    const reasons = [before.status.lastPlan?.idleReason ?? null, ...(before.drain?.blockingReasons ?? []).map((r) => `drain: ${r}`)];
    for (const r of reasons) {
      if (act === 'moving' || r === null) continue;
      // Scores in the reason change every sample: without them, one reason is one key.
      const key = r.replace(/-?\d+\.\d+/g, '#');
      this.idle.set(key, (this.idle.get(key) ?? 0) + dt);
    }
    for (const m of tracked(after)) this.plannedBytes.set(`${m.partition}@${m.to}`, m.bytes);
    const was = new Map(before.topology.partitions.map((p) => [p.id, p]));
    const live = new Set(before.topology.nodes.filter((n) => n.live).map((n) => n.id));
    for (const p of after.topology.partitions) {
      const old = was.get(p.id);
      for (const l of p.learners) {
        const key = `${p.id}@${l}`;
        if (!old?.learners.includes(l) && !this.copies.has(key)) this.historyBytes.set(key, p.historyBytes);
        this.copies.add(key);
      }
      if (old !== undefined && old.owner !== p.owner) {
        if (live.has(old.owner)) this.handoffs++;
        else this.failovers++;
      }
    }
  }

  /** Bytes of the copies made: the planner's cost where the loop or a drain tracked the move, else the history. */
  bytes(): number {
    let sum = 0;
    for (const key of this.copies) sum += this.plannedBytes.get(key) ?? this.historyBytes.get(key) ?? 0;
    return sum;
  }
}

const counts = (steps: Proposal[]) => ({
  moves: steps.filter((s) => s.op !== 'owner_handoff').length,
  handoffs: steps.filter((s) => s.op === 'owner_handoff').length,
  bytes: steps.reduce((a, s) => a + (s.op !== 'owner_handoff' ? s.bytes : 0), 0),
});

/** Makes the trigger; returns the node it concerns, the nodes draining after it and the drain to follow, if any. */
async function fire(p: Product, trigger: Trigger): Promise<{ node: string; draining: string[]; drained: string | null }> {
  const t = await p.cluster.topology();
  switch (trigger) {
    case 'join':
      say(`join: POST /v1/nodes ${JOINING.id} (zone ${JOINING.zone}), as npm start's demo does`);
      await p.cluster.joinNode(JOINING.id, 1, JOINING.zone);
      return { node: JOINING.id, draining: [], drained: null };
    case 'drain': {
      const node = queueOnlyNode(t);
      await cli(p, ['drain', node, '--reason', 'settle benchmark: drain', '--json'], say);
      return { node, draining: [node], drained: node };
    }
    case 'lost': {
      const node = queueOnlyNode(t);
      say(`lost: POST /v1/faults crash-node ${node}, then lose-disk ${node}: down for good`);
      await p.cluster.fault({ fault: 'crash-node', node });
      await p.cluster.fault({ fault: 'lose-disk', node });
      return { node, draining: [], drained: null };
    }
    case 'return': {
      const node = queueOnlyNode(t);
      say(`return: first drain ${node} to its end, so its copies move and it keeps them as retained copies (not timed)`);
      await cli(p, ['drain', node, '--wait', '--reason', 'settle benchmark: leave retained copies', '--json'], say);
      const held = (await p.cluster.topology()).partitions.filter((x) => x.retainedCopies.some((c) => c.node === node)).length;
      say(`return: ${node} holds ${held} retained cop${held === 1 ? 'y' : 'ies'}; it returns now`);
      await cli(p, ['undrain', node, '--reason', 'settle benchmark: the node returns', '--json'], say);
      return { node, draining: [], drained: null };
    }
  }
}

/** Waits until the loop has ticked on a settled cluster: the fresh cluster starts balanced, and every trigger starts from rest. */
async function untilBalanced(p: Product): Promise<RebalancerStatus> {
  const deadline = Date.now() + BALANCED_TIMEOUT_MS;
  for (;;) {
    const o = await observe(p, null).catch(() => null);
    const why = o === null ? ['no loop status yet'] : unsettled(o, o.status.settings.planner, []).why;
    if (o !== null && o.status.ticks > 0 && why.length === 0) return o.status;
    if (Date.now() > deadline) throw new Error(`the fresh cluster was not settled within ${BALANCED_TIMEOUT_MS / 1000} s: ${why.join('; ')}`);
    await sleep(SAMPLE_MS);
  }
}

async function runTrigger(trigger: Trigger, timeoutS: number): Promise<Record<string, unknown>> {
  const p = await startProduct(`settle-${trigger}`, CLUSTER_SHAPE, say);
  try {
    const { settings } = await untilBalanced(p);
    const cfg = settings.planner;
    const fired = await fire(p, trigger);
    const t0 = Date.now();
    let before = await observe(p, fired.drained);
    // The transfer bound's plan: what the data asks for, planned on the topology the trigger left, no cooldowns.
    const input: PlanInput = { topology: before.topology, inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: before.now, draining: fired.draining };
    const plan = [...(trigger === 'lost' ? repairSteps(before.topology, fired.node) : []), ...planToConvergence(input, withoutCooldowns(cfg)).steps];
    const boundMs = transferBoundMs(plan, cfg.syncBytesPerSec);
    const bound = lowerBounds(input, withoutCooldowns(cfg));
    const tally = new Tally();
    let settledMs: number | null = null;
    // From when nothing ran and the planner proposed nothing even without cooldowns, through to the end: the
    // product had stopped by itself, settled or not.
    let restSince: number | null = null;
    let drainEndedMs: number | null = null;
    let why: string[] = [];
    let limit: { node: string; reason: string }[] = [];
    while (Date.now() - t0 < timeoutS * 1000) {
      await sleep(SAMPLE_MS);
      const after = await observe(p, fired.drained);
      const act = activity(before, cfg, fired.draining);
      tally.see(before, after, act);
      restSince = act === 'blocked' && running(before) === 0 ? (restSince ?? before.now - t0) : null;
      if (after.drain?.outcome != null) drainEndedMs ??= after.now - t0;
      before = after;
      ({ why, limit } = unsettled(after, cfg, fired.draining));
      if (why.length === 0) {
        settledMs = after.now - t0;
        break;
      }
    }
    const breaches = (await p.cluster.invariants()).breaches.length;
    const target = targetMs(boundMs, settings.tickMs);
    const busiest = busiestReceiver(plan);
    return {
      trigger,
      node: fired.node,
      settled: settledMs !== null,
      settledS: settledMs === null ? null : round(settledMs / 1000, 1),
      ...(settledMs === null ? { timeoutS, atRestS: restSince === null ? null : round(restSince / 1000, 1), unsettledAtEnd: why.slice(0, 5), unsettledCount: why.length } : {}),
      ...(fired.drained === null ? {} : { drainEndedS: drainEndedMs === null ? null : round(drainEndedMs / 1000, 1) }),
      ...(limit.length > 0 ? { zoneBound: limit } : {}),
      transferBoundS: round(boundMs / 1000, 1),
      busiestReceiver: busiest,
      ratio: settledMs === null || boundMs === 0 ? null : round(settledMs / boundMs, 2),
      targetS: round(target / 1000, 1),
      pass: settledMs !== null && settledMs <= target,
      done: { moves: tally.copies.size, handoffs: tally.handoffs, failovers: tally.failovers, bytes: tally.bytes() },
      plan: counts(plan),
      lowerBound: { moves: bound.moves, bytes: bound.bytes },
      waitedS: Object.fromEntries(Object.entries(tally.seconds).map(([k, v]) => [k, round(v, 1)])),
      idleReasonsS: Object.fromEntries([...tally.idle].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([k, v]) => [k, round(v, 1)])),
      invariantBreaches: breaches,
      settings: { tickMs: settings.tickMs, nodeCooldownMs: cfg.nodeCooldownMs, partitionCooldownMs: cfg.partitionCooldownMs, syncBytesPerSec: cfg.syncBytesPerSec, threshold: cfg.threshold },
      loadAverage: round(loadavg()[0]!, 2),
    };
  } finally {
    await p.close();
    rmSync(p.dir, { recursive: true, force: true });
  }
}

function summary(r: Record<string, unknown>): string {
  const w = r.waitedS as Record<Activity, number>;
  const b = r.busiestReceiver as { node: string | null; bytes: number };
  const rest = r.atRestS == null ? '' : ` (nothing more happened after ${String(r.atRestS)} s)`;
  const bound = Array.isArray(r.zoneBound) ? ` (${(r.zoneBound as { node: string }[]).map((b) => b.node).join(', ')} above the band: the zone rule holds every copy there)` : '';
  const head = r.settled ? `settled in ${String(r.settledS)} s${bound}` : `NOT settled within ${String(r.timeoutS)} s${rest}`;
  return (
    `${String(r.trigger)} ${String(r.node)}: ${head}; transfer bound ${String(r.transferBoundS)} s (${b.node ?? 'no node'} receives ${round(b.bytes / 2 ** 20, 1)} MiB)` +
    `${r.ratio === null ? '' : `, ratio ${String(r.ratio)}`}; target ${String(r.targetS)} s: ${r.pass ? 'pass' : 'MISS'}; ` +
    `waited: cooldowns ${w.cooldown} s, ticks ${w.tick} s, sync budget ${w.syncBudget} s, blocked ${w.blocked} s (moving ${w.moving} s)`
  );
}

export async function run(args: string[]): Promise<void> {
  const at = args.indexOf('--timeout-s');
  const timeoutS = at >= 0 ? Number(args[at + 1]) : DEFAULT_TIMEOUT_S;
  if (!Number.isFinite(timeoutS) || timeoutS <= 0) throw new Error(`--timeout-s is ${JSON.stringify(args[at + 1] ?? '')}: expected seconds above 0`);
  const named = args.filter((a, i) => !a.startsWith('-') && (at < 0 || i !== at + 1));
  const unknown = named.filter((a) => !TRIGGERS.includes(a as Trigger));
  if (unknown.length > 0) throw new Error(`unknown trigger ${unknown.join(', ')}: expected any of ${TRIGGERS.join(', ')}`);
  for (const trigger of named.length > 0 ? (named as Trigger[]) : TRIGGERS) {
    const r = await runTrigger(trigger, timeoutS);
    console.log(JSON.stringify(r));
    say(summary(r));
  }
}
