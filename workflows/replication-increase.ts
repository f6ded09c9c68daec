/**
 * Replication-factor increase (the note's "step 0 then promotion to follower, no removal"): add T as a learner,
 * wait until the broker admits it, then one guarded write promotes T and raises the configured replication
 * factor together, so W changes only when T starts to count. Every exit before the promotion drops the learner.
 */
import type { GrowRequest, MoveOutcome } from '../rules/definitions';
import { patched } from '@temporalio/workflow';
import { checkGrow, ZONE_SPREAD } from '../rules/grow-rules';
import { untilCounted } from './steps/new-copy';
import { begin } from './steps/operation';
import { promoteLearner } from './steps/learner';

export async function replicationIncrease(request: GrowRequest): Promise<MoveOutcome> {
  const { partition, to: T, origin } = request;
  // Asked first, before any command: the zone rule an execution starts under is the one it keeps.
  const spread = patched(ZONE_SPREAD);
  const op = begin({ kind: 'grow', partition, from: null, to: T, origin }, request);

  return op.run(async () => {
    // ---- validating (the rules the client checked, against what the broker says now), step 0, then the promotion: T
    // counts and the replication factor rises in the same write.
    const promoted = await untilCounted({
      op,
      to: T,
      origin,
      counting: 'the promotion',
      count: (interrupts) => promoteLearner(op, T, interrupts),
      check: (ctx) => checkGrow(ctx.view.partition, ctx.nodes, T, spread),
    });
    if ('ended' in promoted) return promoted.ended;
    return { status: 'completed', partition, from: null, to: T, boundary: null, epoch: op.watch.epoch };
  });
}
