/** Step 2: remove the leaving copy once the new one covers the boundary, and the wait for durability it starts with. */
import type { Refusal } from '../../cluster/contract';
import type { MovePhase } from '../../rules/definitions';
import type { Operation } from './operation';
import { noInterrupts, type WaitStep, type WriteStep } from './step';
import { SWAP_BACK_AFTER_MS } from './swap';
import type { Interrupt } from './watch';

/**
 * Wait until every one of `nodes` is live and durable at or beyond `boundary`, with no recovery pending.
 * `keeps` names the copy that stays eligible meanwhile (the leaving follower), `since` the step that made
 * the wait necessary and `orElse` what happens if a node stays down, for the words.
 */
export function waitDurable(
  op: Operation,
  nodes: string[],
  boundary: number,
  words: { keeps?: string; since?: string; phase?: MovePhase; orElse?: string } = {},
  interrupts: () => Interrupt | null = noInterrupts,
): WaitStep {
  const w = op.watch;
  const kept = words.keeps ? `${words.keeps} stays eligible and keeps its data; ` : '';
  const since = words.since ? ` ${words.since}` : '';
  const orElse = words.orElse ?? 'for recovery';
  return {
    phase: words.phase ?? 'covering_boundary',
    done: () => !w.recoveryPending && nodes.every((n) => w.live(n) && w.durable(n) >= boundary),
    interrupts,
    describe: () => {
      if (w.recoveryPending) return `pending recovery on ${w.partitionId}: ${kept}waiting for activation`;
      const down = nodes.filter((n) => !w.live(n)).join(', ');
      if (down) return `${down} is down${since}: ${kept}waiting for ${down} to return or ${orElse}`;
      const behind = nodes.filter((n) => w.durable(n) < boundary);
      return `waiting for ${behind.join(', ')} durable at ${boundary}: at ${behind.map((n) => Math.max(0, w.durable(n))).join(', ')}`;
    },
  };
}

/**
 * Step 2: remove `node` (leaving) once `target` covers B; it keeps its data as a retained copy for the grace
 * period. Passing refusals (see classifyRemovalRefusal) wait for the boundary again; `not_leaving` and final
 * ones end the step for the composition to judge. `lost` (targetLostInterrupts) lets the wait end for a swap
 * back, with the words saying when; without it nothing interrupts the step.
 */
export function removeLeaving(
  op: Operation,
  node: string,
  target: string,
  boundary: number,
  classify: (r: Refusal) => 'passing' | 'target_down' | 'not_leaving' | 'final',
  lost?: () => Interrupt | null,
): WriteStep<void> {
  const w = op.watch;
  const interrupts = lost ?? noInterrupts;
  const after = `${Math.round((w.timing.swapBackAfterMs ?? SWAP_BACK_AFTER_MS) / 1000)}s`;
  const orElse = lost ? `for the swap back after ${after} down (a cancel swaps back at once)` : undefined;
  return {
    phase: 'removing',
    write: 'remove-leaving',
    body: () => ({ node }),
    summary: `Remove ${node} from ${w.partitionId}: ${target} covers boundary ${boundary}`,
    // Already removed, by the removal chained to the swap.
    finished: () => {
      const p = w.partition;
      return p && p.leaving !== node && !p.history.some((h) => h.node === node) && p.followers.includes(target) ? { value: undefined } : null;
    },
    before: waitDurable(op, [target], boundary, { keeps: node, since: 'after the swap', ...(orElse ? { orElse } : {}) }, interrupts),
    accepted: () => undefined,
    passing: (r) => ['passing', 'target_down'].includes(classify(r)),
    onPassing: async (r) => {
      if (classify(r) === 'target_down') w.noteLive(target, false);
      // The broker's word on T's durable offset wins over what signals said (a lost disk can lower it).
      if (r.code === 'boundary_not_covered') await w.rereadDurable(target);
    },
    interrupts,
    retrying: (r) => `retrying the removal of ${node}: ${r.message}`,
  };
}
