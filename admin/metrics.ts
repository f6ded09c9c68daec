/**
 * The service's Prometheus series, read from their sources on each scrape (the broker, Temporal, the planner):
 * nothing is sampled in the background. Counters follow what they count across scrapes: the planner decisions
 * of the loop and of each drain (from their own totals, so a move that starts and ends between two scrapes counts), refusals by code
 * (operator requests refused, moves that ended aborted), the broker's invariant breaches, the loop's ticks.
 * Each breach counter starts at 0 for every invariant the broker numbers, so the first breach is an increase
 * Prometheus sees (a counter that appears at 1 has no increase to alert on).
 */
import { Counter, Gauge, Registry } from 'prom-client';
import type { MoveStatus } from '../rules/definitions';
import type { AdminDeps } from './deps';
import { withTransferBytes } from '../operations/scores';

/** The safety invariants a broker's breaches name, numbered 1-5 as the design's (cluster/contract.ts, Breach). */
const INVARIANTS = [1, 2, 3, 4, 5];

export function createMetrics() {
  const registry = new Registry();
  const gauge = (name: string, help: string, labelNames: string[] = []) => new Gauge({ name, help, labelNames, registers: [registry] });
  const counter = (name: string, help: string, labelNames: string[] = []) => new Counter({ name, help, labelNames, registers: [registry] });

  const moves = gauge('rebalancer_moves', 'Reconfigurations in progress by kind and phase', ['kind', 'phase']);
  const remaining = gauge('rebalancer_move_remaining_bytes', 'Bytes the target of a move in progress still has to copy', ['partition', 'kind', 'from', 'to']);
  const syncInUse = gauge('rebalancer_sync_budget_in_use_transfers', 'Transfer slots in use per node (the sync budget)', ['node']);
  const syncLimit = gauge('rebalancer_sync_budget_limit_transfers', 'Transfer slots per node', ['node']);
  const decisions = counter('rebalancer_planner_decisions_total', "Moves the rebalancer loop and drains started on the planner's proposals, by kind", ['kind']);
  const spread = gauge('rebalancer_score_spread', 'Largest |node score - cluster mean| (score units)');
  const mean = gauge('rebalancer_score_mean', 'Cluster mean of the node scores (score units)');
  const refusals = counter('rebalancer_refusals_total', 'Requests refused and moves aborted, by code', ['code']);
  const breaches = counter('rebalancer_invariant_breaches_total', 'Safety invariant breaches the broker reports, by invariant', ['invariant']);
  const relayLag = gauge('rebalancer_relay_lag_events', "Events of the broker's feed the progress relay has not delivered yet");
  const recovery = gauge('rebalancer_recovery_pending_partitions', 'Partitions with a pending recovery');
  const paused = gauge('rebalancer_paused', '1 while rebalancing is paused');
  const under = gauge('rebalancer_under_replicated_partitions', 'Partitions with fewer counted live copies than their replication factor');
  const repairs = gauge('rebalancer_repairs_in_flight', 'Lost-follower replacements running (the loop\'s repairs and operators\')');
  const pausedFor = gauge('rebalancer_paused_seconds', 'How long rebalancing has been paused so far; 0 while it runs');
  const blockedFor = gauge(
    'rebalancer_move_blocked_seconds',
    'How long a move in progress has been waiting on its blocking reason, as this admin service saw it (0 while it is not blocked)',
    ['partition', 'kind'],
  );
  const topologyDrift = gauge('rebalancer_topology_drift_records', "Partition records the check (a whole read, or the topology's pages) found different from this service's model kept by the changes read, since it started");
  const topologyReads = gauge('rebalancer_topology_reads', 'Reads of the topology by this service since it started: whole, page (of the check), changes, and whole because the broker could not list the changes', ['kind']);
  const ticks = counter('rebalancer_loop_ticks_total', 'Ticks of the rebalancer loop (each a plan, unless paused or a recovery is pending)');
  for (const invariant of INVARIANTS) breaches.inc({ invariant: String(invariant) }, 0);

  /** Aborted outcomes already counted, so the counter rises once per move. */
  const seenAborted = new Set<string>();
  const breachesSeen = new Map<string, number>();
  const decisionsSeen = new Map<string, number>();
  let ticksSeen = 0;
  /** When this service first saw each move in progress blocked, by partition and kind; dropped once it is not. */
  const blockedSince = new Map<string, number>();

  return {
    contentType: registry.contentType,
    refusal(code: string): void {
      refusals.inc({ code });
    },
    async scrape(deps: AdminDeps, readMoves: () => Promise<MoveStatus[]>): Promise<string> {
      const [topology, running, budget, invariants, lag, state, ended, drains] = await Promise.all([
        deps.topology(),
        readMoves(),
        deps.syncBudget(),
        deps.invariants(),
        deps.relayLag(),
        deps.rebalancer.status(),
        deps.recentMoves(50),
        deps.drainDecisions(),
      ]);
      const now = Date.now();
      moves.reset();
      remaining.reset();
      blockedFor.reset();
      const blockedNow = new Set<string>();
      for (const m of running) {
        moves.inc({ kind: m.kind, phase: m.phase });
        if (m.bytesRemaining !== null) remaining.set({ partition: m.partition, kind: m.kind, from: m.from ?? '', to: m.to }, m.bytesRemaining);
        const key = `${m.partition}\u0000${m.kind}`;
        if (m.blockingReason === null) blockedSince.delete(key);
        else {
          blockedNow.add(key);
          if (!blockedSince.has(key)) blockedSince.set(key, now);
        }
        blockedFor.set({ partition: m.partition, kind: m.kind }, (now - (blockedSince.get(key) ?? now)) / 1000);
      }
      // A move that ended is forgotten: its partition's next move starts unblocked.
      for (const key of blockedSince.keys()) if (!blockedNow.has(key)) blockedSince.delete(key);
      followTotals(decisions, 'kind', decisionsSeen, Object.entries(state.startedByKind));
      for (const d of drains) followTotals(decisions, 'kind', decisionsSeen, Object.entries(d.startedByKind), d.drain);
      for (const m of ended) {
        if (m.outcome?.status !== 'aborted' || seenAborted.has(`${m.workflowId}@${m.closedAt}`)) continue;
        seenAborted.add(`${m.workflowId}@${m.closedAt}`);
        refusals.inc({ code: m.outcome.code });
      }
      syncInUse.reset();
      syncLimit.reset();
      for (const n of budget.nodes) {
        syncInUse.set({ node: n.node }, n.inUse);
        syncLimit.set({ node: n.node }, n.limit);
      }
      const byInvariant = new Map<string, number>();
      for (const b of invariants.breaches) byInvariant.set(String(b.invariant), (byInvariant.get(String(b.invariant)) ?? 0) + 1);
      followTotals(breaches, 'invariant', breachesSeen, byInvariant);
      const scores = deps.scores(topology, withTransferBytes(running, budget.transfers));
      spread.set(scores.spread);
      mean.set(scores.mean);
      const reads = deps.topologyReads();
      topologyDrift.set(reads.drifts);
      topologyReads.set({ kind: 'whole' }, reads.fullReads);
      topologyReads.set({ kind: 'page' }, reads.pageReads);
      topologyReads.set({ kind: 'changes' }, reads.changesReads);
      topologyReads.set({ kind: 'fallback' }, reads.fallbacks);
      if (lag === null) relayLag.reset();
      else relayLag.set(lag);
      recovery.set(topology.partitions.filter((p) => p.pendingRecovery).length);
      paused.set(state.state === 'paused' ? 1 : 0);
      under.set(deps.underReplicated(topology, running).length);
      repairs.set(running.filter((m) => m.kind === 'replace').length);
      pausedFor.set(state.state === 'paused' && state.since !== null ? Math.max(0, now - Date.parse(state.since)) / 1000 : 0);
      // A new loop (fewer ticks than seen) counts on from where it starts, as followTotals does.
      if (state.ticks !== null) {
        if (state.ticks > ticksSeen) ticks.inc(state.ticks - ticksSeen);
        ticksSeen = state.ticks;
      }
      return registry.metrics();
    },
  };
}

/**
 * Raises a counter by what a source's running totals grew since the last scrape. A total below the one seen
 * (a new loop, a restarted broker) starts over from it, so the counter never goes down. `source` keeps apart
 * the totals of sources that add to the same series (the loop and each drain).
 */
function followTotals(counter: Counter, label: string, seen: Map<string, number>, totals: Iterable<[string, number]>, source = ''): void {
  for (const [value, total] of totals) {
    const key = `${source}\u0000${value}`;
    const delta = total - (seen.get(key) ?? 0);
    if (delta > 0) counter.inc({ [label]: value }, delta);
    seen.set(key, total);
  }
}
