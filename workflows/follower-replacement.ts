/**
 * Lost follower replaced (the note's "step 0 on the replacement, then remove the lost copy once the threshold
 * allows"): add T as a learner, wait until the broker admits it, swap T in for the lost L (boundary B), then
 * remove L once T is durable at B. Nothing asks anything of L, so this finishes when L never comes back; L stays
 * eligible with whatever its disk holds until the removal. Before the swap every exit drops the learner; past
 * it the only ways on are finishing or ordinary recovery.
 */
import type { MoveOutcome, ReplaceRequest } from '../rules/definitions';
import { patched } from '@temporalio/workflow';
import { checkReplace, ZONE_SPREAD } from '../rules/grow-rules';
import { removeOnceCovered, untilCounted } from './steps/new-copy';
import { begin } from './steps/operation';
import { swap } from './steps/swap';

export async function followerReplacement(request: ReplaceRequest): Promise<MoveOutcome> {
  const { partition, lost: L, with: T, origin } = request;
  // Asked first, before any command: the zone rule an execution starts under is the one it keeps.
  const spread = patched(ZONE_SPREAD);
  const op = begin({ kind: 'replace', partition, from: L, to: T, origin }, request);

  return op.run(async () => {
    // ---- validating (the rules the client checked, against what the broker says now), step 0, then step 1: T counts
    // in L's place; the owner records boundary B.
    const swapped = await untilCounted({
      op,
      to: T,
      origin,
      counting: 'the swap',
      count: (interrupts) => swap(op, T, L, interrupts),
      check: (ctx) => checkReplace(ctx.view.partition, ctx.nodes, L, T, spread),
    });
    if ('ended' in swapped) return swapped.ended;
    const B = swapped.value;
    op.refuseCancel(
      () =>
        `refused: ${partition} already counts ${T} instead of the lost ${L} (swap at boundary ${B}); the replacement finishes ` +
        `by removing ${L} once ${T} is durable at ${B} (now ${op.snapshot().targetDurable ?? 'unknown'}).`,
    );
    // ---- step 2: remove L once T covers B.
    return removeOnceCovered(op, L, T, B);
  });
}
