/**
 * The note's policy, one tick at a time: what may start now on a ClusterState, within the transfer limits, in
 * this order. Nothing while any recovery is pending; lost copies are replaced first (repair.ts); a draining node's
 * copies leave next, owners by handoff, then follower moves (drain.ts); then follower moves that bring the total
 * score inside its band (balance.ts), and those that bring each dimension inside its own band (band-step.ts);
 * owner handoffs only once no follower move is in flight or proposed (balance.ts), but for one that frees an owner's
 * copy for a node holding a retained copy of it, the first half of that move. The rules every step checks are
 * tick.ts's.
 */
import { balanceFollowers, balanceOwners } from './balance';
import { balanceBands, bandsIdleReason } from './band-step';
import { drain } from './drain';
import { repair } from './repair';
import type { ClusterState } from './state';
import { f2, TickPlanner, type Tick, type TickContext } from './tick';

export function proposeTick(st: ClusterState, ctx: TickContext): Tick {
  const tp = new TickPlanner(st, ctx);
  const paused = tp.paused();
  if (paused !== null) return { proposals: [], idleReason: paused };
  if (tp.free <= 0)
    return { proposals: [], idleReason: `cluster transfer limit reached: ${ctx.inFlight} of ${ctx.config.maxTransfersPerCluster} moves in flight` };
  if (!st.nodes.some((n) => st.stays(n))) return { proposals: [], idleReason: 'no live node that is not draining' };
  if (ctx.repair) repair(tp);
  drain(tp);
  balanceFollowers(tp);
  balanceBands(tp);
  if (!ctx.followerMovesInFlight && !tp.out.some((p) => p.op !== 'owner_handoff')) balanceOwners(tp);
  if (tp.out.length > 0) return { proposals: tp.out, idleReason: null };
  if (tp.blocked !== null) return { proposals: [], idleReason: tp.blocked };
  if (ctx.followerMovesInFlight) return { proposals: [], idleReason: 'follower moves in flight: owner handoffs wait until they end' };
  const t = ctx.config.threshold;
  const low = st.nodes.find((n) => st.stays(n) && tp.dev(n) < -t);
  const bands = low === undefined ? bandsIdleReason(tp) : null;
  if (bands !== null) return { proposals: [], idleReason: bands };
  return {
    proposals: [],
    idleReason:
      low === undefined
        ? `every node within the threshold: largest deviation from the mean ${f2(st.spread())} <= ${t}`
        : `${low.id} is ${f2(-tp.dev(low))} below the mean but no node is above mean + ${t} to shed to it`,
  };
}
