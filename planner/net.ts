/**
 * A plan's net steps: where a later round of the plan moves on what an earlier round just did to the same partition
 * (a copy sent on from where it arrived, an owner role handed on or back), the plan shows one step from where the
 * copy or role was to where it ends, or none when it ends where it was. So no replica moves twice or back in a plan,
 * though the loop, which plans one tick at a time, may take such a copy there in two moves, the second once the
 * first's partition cooldown ends.
 */
import type { Proposal } from './types';

/**
 * `later` carried out right after `earlier` on the same partition, as one step; null when they cancel out; undefined
 * when they do not join. Follower copies of a partition are alike: a copy sent on from where it arrived goes straight
 * there, and one sent to where an earlier copy left stands in for that copy, which then need not have moved.
 */
function join(earlier: Proposal, later: Proposal): Proposal | null | undefined {
  if (earlier.partition !== later.partition) return undefined;
  if (earlier.op === 'owner_handoff' || later.op === 'owner_handoff') {
    if (earlier.op !== later.op || earlier.to !== later.from) return undefined;
    return later.to === earlier.from ? null : { ...later, from: earlier.from, reason: straight(later, earlier) };
  }
  if (later.op !== 'follower_move') return undefined;
  if (earlier.to === later.from) return later.to === earlier.from ? null : { ...later, op: earlier.op, from: earlier.from, reason: straight(later, earlier) };
  if (earlier.op === 'follower_move' && later.to === earlier.from) {
    return { ...earlier, from: later.from, reason: `${earlier.reason} (from ${later.from} in place of ${earlier.from}: the plan later sent ${earlier.from} a copy from ${later.from})` };
  }
  return undefined;
}

function straight(later: Proposal, earlier: Proposal): string {
  return `${later.reason} (straight from ${earlier.from}: the plan first sent it to ${earlier.to})`;
}

/**
 * `later`, a copy sent to where `earlier` took one from, standing in for that copy at `earlier`'s place: from
 * `later`'s source to `earlier`'s receiver, the receiver holding its copy from the same time as before. Undefined when
 * they do not join so.
 */
function standInEarly(earlier: Proposal, later: Proposal): Proposal | undefined {
  if (earlier.partition !== later.partition || earlier.op !== 'follower_move' || later.op !== 'follower_move') return undefined;
  if (later.to !== earlier.from || later.from === earlier.to) return undefined;
  return { ...earlier, from: later.from, reason: `${earlier.reason} (from ${later.from} in place of ${earlier.from}: the plan later sent ${earlier.from} a copy from ${later.from})` };
}

/**
 * Joins each step with an earlier step on the same partition that it carries on, in order, where none of the
 * partition's steps between them names a node whose copy or role the join moves in time (the earlier step's two, and
 * a handoff's receiver): those steps find the same holders with or without the pair. A joined step takes the later
 * one's place in the plan; a copy standing in for one an earlier step took may instead take the earlier step's place,
 * where the steps between name neither its source nor the node it spares (a handoff between to the earlier step's
 * receiver needs that receiver's copy by then).
 */
function joinPairs(steps: readonly Proposal[]): Proposal[] {
  const out: (Proposal | null)[] = [];
  /** Per partition, the places in `out` of its steps still there, in order. */
  const places = new Map<string, number[]>();
  for (const step of steps) {
    let mine = places.get(step.partition);
    if (mine === undefined) places.set(step.partition, (mine = []));
    // A joined step may join an earlier one in turn.
    let next: Proposal | null = step;
    for (let joined = true; joined && next !== null; ) {
      joined = false;
      const between = new Set<string>();
      for (let i = mine.length - 1; i >= 0; i--) {
        const earlier = out[mine[i]!]!;
        const both: Proposal | null | undefined = [earlier.from, earlier.to, ...(next.op === 'owner_handoff' ? [next.to] : [])].some((n) => between.has(n)) ? undefined : join(earlier, next);
        if (both !== undefined) {
          out[mine[i]!] = null;
          mine.splice(i, 1);
          [next, joined] = [both, true];
          break;
        }
        const early = between.has(next.from) || between.has(next.to) ? undefined : standInEarly(earlier, next);
        if (early !== undefined) {
          out[mine[i]!] = early;
          next = null;
          break;
        }
        between.add(earlier.from).add(earlier.to);
      }
    }
    if (next === null) continue;
    mine.push(out.length);
    out.push(next);
  }
  return out.filter((s): s is Proposal => s !== null);
}

/**
 * The plan's net steps: pairs joined (`joinPairs`) and roles routed through a follower (`throughFollower`), again
 * until neither changes anything (a step joined at an earlier place may then join a step before it). Each change
 * leaves fewer steps or, routing a role, one copy fewer to move, so this ends.
 */
export function netSteps(steps: readonly Proposal[]): Proposal[] {
  for (let net: readonly Proposal[] = steps; ; ) {
    const next = throughFollower(joinPairs(net));
    if (next.length === net.length && next.every((s, i) => s === net[i])) return next;
    net = next;
  }
}

/**
 * A copy sent a->b for the role handed c->b, and the old owner's copy then sent c->a, back where the first copy
 * left: no copy need leave a. The role goes c->a, c's copy to b, the role a->b, all at the handoff's place: one copy
 * moved instead of two, a second handoff for it. Only where the partition's steps between name none of the nodes
 * whose holding this moves in time (a or b before the handoff, a or c after it).
 */
export function throughFollower(steps: Proposal[]): Proposal[] {
  const out: Proposal[][] = steps.map((s) => [s]);
  for (let l = 0; l < steps.length; l++) {
    const later = steps[l]!;
    if (later.op !== 'follower_move') continue;
    let hand = -1;
    for (let i = l - 1; i >= 0; i--) {
      const s = steps[i]!;
      if (s.partition !== later.partition || out[i]!.length === 0) continue;
      const names = (...nodes: string[]) => nodes.includes(s.from) || nodes.includes(s.to);
      if (hand < 0) {
        if (s.op === 'owner_handoff' && s.from === later.from && s.to !== later.to) hand = i;
        else if (names(later.to, later.from)) break;
        continue;
      }
      const handoff = steps[hand]!;
      if (s.op === 'follower_move' && s.from === later.to && s.to === handoff.to) {
        const a = s.from;
        const b = handoff.to;
        const c = handoff.from;
        out[hand] = [
          { ...handoff, to: a, reason: `${handoff.reason} (through ${a}, which keeps its copy: the plan sent ${a}'s copy to ${b} and ${c}'s to ${a})` },
          { ...later, from: c, to: b, reason: `${later.reason} (to ${b} in place of ${a}'s copy, which stays)` },
          { ...handoff, from: a, reason: `${handoff.reason} (through ${a})` },
        ];
        out[i] = [];
        out[l] = [];
        break;
      }
      if (names(later.to, handoff.to)) break;
    }
  }
  return out.flat();
}

/**
 * No replica moves twice or back in `steps`: no node gives a copy of a partition it got, or gets one it gave, and no
 * node takes back an owner role it handed off.
 */
export function movesOnce(steps: readonly Proposal[]): boolean {
  const gave = new Set<string>();
  const got = new Set<string>();
  const owned = new Set<string>();
  for (const s of steps) {
    if (s.op === 'owner_handoff') {
      if (owned.has(`${s.partition}/${s.to}`)) return false;
      owned.add(`${s.partition}/${s.from}`);
      continue;
    }
    if (got.has(`${s.partition}/${s.from}`) || gave.has(`${s.partition}/${s.to}`)) return false;
    gave.add(`${s.partition}/${s.from}`);
    got.add(`${s.partition}/${s.to}`);
  }
  return true;
}
