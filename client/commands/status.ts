import type { Command } from 'commander';
import type { UnderReplicated } from '../../planner';
import { repairHeldWords } from '../../planner/repair';
import type { RebalancerStatus } from '../../rules/definitions';
import { formatBytes } from '../../rules/format';
import { rebalancerStatus } from '../../operations/rebalancer';
import { defineCommand, moveLabel, table, withConnection, type CommandDeps } from '../output';
import { readFromLine, statusView, wholeTopology, type ReadFrom } from '../views';
import { planLines } from './approve';
import { loopScope } from './pause';

/** Pins or exclusions: id, who, since when and why; `-` when none. */
function holdList(holds: RebalancerStatus['pinned']): string {
  return Object.entries(holds).map(([id, n]) => `${id} by ${n.by} since ${new Date(n.at).toISOString()}: ${n.reason}`).join('; ') || '-';
}

/**
 * Why the loop has not started a repair of `partition` yet: the reason its last plan gave (a step not started, or what
 * held the repair when nothing started), the pause, or else the transfer limit it shares with every move (repairs
 * come first when a slot frees).
 */
function repairHeld(s: RebalancerStatus, partition: string): string {
  const skipped = s.lastPlan?.skipped.find((k) => k.partition === partition);
  if (skipped) return skipped.reason;
  const idle = s.lastPlan?.idleReason;
  if (idle?.includes(repairHeldWords(partition))) return idle;
  if (s.paused) return 'the loop is paused';
  return `it starts at a tick with a transfer slot free (${s.inFlight.length} move(s) in flight, at most ${s.settings.planner.maxTransfersPerCluster})`;
}

/** One line per under-replicated partition: live copies, what is lost and why, the repair running or what holds it. */
export function describeUnder(under: UnderReplicated[], s: RebalancerStatus): string[] {
  if (under.length === 0) return ['under-replicated: -'];
  const word = (u: UnderReplicated) =>
    u.repair
      ? `repairing: ${moveLabel(u.repair.lost, u.repair.to)}`
      : u.lost.length > 0
        ? `lost (${u.lost.map((l) => l.reason).join('; ')}), repair not started: ${repairHeld(s, u.partition)}`
        : 'a copy is down, within the repair timeout';
  return [`under-replicated: ${under.length} partition(s)`, table([['PARTITION', 'LIVE', 'STATE'], ...under.map((u) => [u.partition, `${u.liveCopies}/${u.replicationFactor}`, word(u)])])];
}

function describe(s: RebalancerStatus & { asOf?: string }, under: UnderReplicated[], from: ReadFrom): string {
  const state = s.paused ? `paused by ${s.paused.by} at ${new Date(s.paused.at).toISOString()}: ${s.paused.reason}` : 'running';
  const plan = s.lastPlan;
  const at = (until: number) => new Date(until).toISOString();
  const cooling = Object.entries(s.cooldowns.nodes).map(([n, until]) => `${n} until ${at(until)}`);
  // A partition cooldown keeps the copy on the node it arrived on and off the node it left. Those of completed moves
  // are kept by the worker, thousands at size: a count here, each one in `rebalancer plan --json` (loop.cooldowns).
  const cooled = [
    ...(s.cooling ? [`${s.cooling} after a completed move (each: rebalancer plan --json)`] : []),
    ...Object.entries(s.cooldowns.partitions).map(([p, until]) => `${p} (whole) until ${at(until)}`),
  ];
  const lines = [
    `rebalancer:     ${state}`,
    `waiting for:    ${s.waitingFor}`,
    `last plan:      ${plan ? `${plan.stepCount ?? plan.steps.length} step(s), ${plan.started.length} started; ${plan.idleReason ?? 'moves started'}` : '-'}`,
    `moves:          ${s.moves.started} started, ${s.moves.completed} completed, ${s.moves.aborted} aborted, ${s.moves.cancelled} cancelled`,
    `cooling nodes:  ${cooling.join(', ') || '-'}`,
    `cooling parts:  ${cooled.join(', ') || '-'}`,
    `pinned:         ${holdList(s.pinned)}`,
    `excluded:       ${holdList(s.excluded)}`,
    `ticks:          ${s.ticks} (every ${s.settings.tickMs} ms)`,
  ];
  if (s.lastResumed) lines.splice(1, 0, `last resumed:   by ${s.lastResumed.by} at ${new Date(s.lastResumed.at).toISOString()}: ${s.lastResumed.reason}`);
  // The admin service waits a moment for the loop's answer, then gives its last one.
  if (s.asOf) lines.splice(1, 0, `as of:          ${s.asOf} (the loop, busy, did not answer in time: its last answer)`);
  if (s.settings.mode === 'propose') lines.splice(1, 0, `mode:           propose (moves start only when a plan is approved)`);
  const approval = s.approval;
  if (approval?.approved) lines.push(`approved plan:  ${approval.approved.planId}, ${approval.approved.steps.length} step(s) not yet started`);
  if (approval?.pending) lines.push('', ...planLines(approval.pending));
  lines.push(...describeUnder(under, s));
  if (s.inFlight.length > 0) {
    lines.push('', table([['PARTITION', 'OP', 'MOVE', 'BYTES', 'WHY'], ...s.inFlight.map((m) => [m.partition, m.op, moveLabel(m.from, m.to), formatBytes(m.bytes), m.reason])]));
  }
  lines.push('', readFromLine(from));
  return lines.join('\n');
}

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'status', {
    description:
      'show the rebalancer: running or paused (by whom and why), pinned partitions and excluded nodes, moves in flight, the last plan and why it started nothing, and the under-replicated partitions with the repairs running (read through the admin service when it runs for this broker, ADMIN_URL, else from the broker whole)',
    examples: ['rebalancer status', 'rebalancer status --json'],
  }).action(async (opts: { json?: boolean }) => {
    const { status, under, from } = await statusView(() =>
      withConnection(deps, async (ctx) => {
        const whole = wholeTopology();
        // Awaited below; a loop that cannot be asked is reported first.
        whole.catch(() => undefined);
        return { status: await rebalancerStatus(ctx.client, loopScope(ctx)), whole: await whole };
      }),
    );
    deps.io.out(opts.json ? JSON.stringify({ ...status, underReplicated: under, readFrom: from }) + '\n' : describe(status, under, from) + '\n');
  });
}
