/**
 * Test-only mutants of the reference cluster: each name removes one precondition of a guarded write or one
 * admission or recovery rule of the cluster itself. Tests add names to `ClusterSim.mutants` (in-process only;
 * never persisted, never in a snapshot, never reachable from the command line, the environment or the data
 * directory) and must then see a breach from the independent checker, or a liveness failure.
 *
 * `safety: false` marks a rule no mutant can make unsafe, with the reason: a randomized test need not kill it.
 */
export interface Mutant {
  /** The rule the mutant removes, in the note's words. */
  rule: string;
  /** True when removing the rule can lose a confirmed message (or break invariant 3 or 5). */
  safety: boolean;
  /** For safety: false, why no removal of this rule can make the cluster unsafe. */
  why?: string;
}

const RECHECKED = 'every other precondition is checked against the current state';

export const MUTANTS = {
  // ---- every guarded write (checked once, in ClusterSim.apply)
  'write.queue-only': {
    rule: 'moves apply to queue partitions only (not_a_queue)',
    safety: false,
    why: `a stream is a partition with W equal to its replica count; ${RECHECKED}, so the same pigeonhole holds`,
  },
  'write.no-pending-recovery': {
    rule: 'no guarded write while a recovery is pending (pending_recovery)',
    safety: false,
    why: `${RECHECKED} and activation seals from the history it finds then, so no write can hide a confirmed message from it; the rule pauses rebalancing during recovery (liveness, not safety)`,
  },
  'write.generation-matches': {
    rule: "the caller's expected generation matches the partition's (generation_mismatch)",
    safety: false,
    why: `it protects the caller's plan from a concurrent change; ${RECHECKED}`,
  },
  'write.admission-open': {
    rule: 'while admission is closed only commit-owner and reopen-admission are accepted (admission_closed)',
    safety: false,
    why: 'commit-owner re-checks every copy counted at commit time against the final boundary, so a change of who counts during the handoff can delay it but not make it continue from a copy missing a confirmed message',
  },

  // ---- add-learner
  'add-learner.known-node': {
    rule: 'the node is registered (unknown_node)',
    safety: false,
    why: 'it rejects a malformed request; without it an unknown node is refused node_down instead',
  },
  'add-learner.node-live': {
    rule: 'the node is live (node_down)',
    safety: false,
    why: 'a learner never counts toward a confirm and is never admitted while it makes no progress',
  },
  'add-learner.not-draining': {
    rule: 'the node is not draining (node_draining)',
    safety: false,
    why: 'placement policy only: a learner never counts toward a confirm',
  },
  'add-learner.not-a-replica': {
    rule: 'the node holds no replica of the partition yet (already_a_replica)',
    safety: true,
  },
  'add-learner.one-change': {
    rule: 'no learner and no leaving replica in flight (change_in_flight; invariant 5)',
    safety: true,
  },
  'add-learner.sync-budget': {
    rule: 'the sync budget (per node, cluster-wide, recovery first) allows another transfer (no_sync_budget)',
    safety: false,
    why: 'the budget bounds transfer load; a learner never counts, so an extra transfer can slow others but not lose a copy',
  },

  // ---- drop-learner
  'drop-learner.is-learner': {
    rule: 'the node is a learner of the partition (not_a_learner)',
    safety: true,
  },

  // ---- swap (step 1)
  'swap.is-learner': {
    rule: 'the joining node is a learner of the partition (not_a_learner)',
    safety: true,
  },
  'swap.learner-admitted': {
    rule: 'T is admitted to the accepted history (not_admitted)',
    safety: true,
  },
  'swap.learner-caught-up': {
    rule: 'T is caught up close to the tail (not_caught_up)',
    safety: false,
    why: 'confirms take the W-th highest counted copy, so a lagging T only delays confirms; R stays eligible until T covers B',
  },
  'swap.learner-live': {
    rule: "T's node is live (node_down)",
    safety: false,
    why: 'a down T is not counted and R stays in the eligible set until removal: confirms stop sooner (availability), no copy is taken away',
  },
  'swap.leaving-is-follower': {
    rule: 'the leaving replica R is a follower, not the owner (not_a_follower)',
    safety: true,
  },
  'swap.one-change': {
    rule: 'no replica is already leaving (change_in_flight)',
    safety: false,
    why: 'unreachable on its own: add-learner refuses while a replica is leaving, so there is no learner to swap in',
  },

  // ---- remove-leaving (step 2)
  'remove-leaving.is-leaving': {
    rule: 'the node is the leaving replica R (not_leaving)',
    safety: true,
  },
  'remove-leaving.boundary-covered': {
    rule: 'the joined replica T is durable at or beyond boundary B (boundary_not_covered; invariant 4)',
    safety: true,
  },
  'remove-leaving.swap-back-covered': {
    rule: "after a swap back, R (counting again) is durable at or beyond B' before T is removed (boundary_not_covered; invariant 4)",
    safety: true,
  },
  'remove-leaving.joined-live': {
    rule: "T's node is live (node_down)",
    safety: false,
    why: 'T holds B on its disk and stays eligible while down, so recovery waits for it: fewer live counted copies cost availability, not a copy',
  },
  'remove-leaving.no-admission-in-flight': {
    rule: 'no learner and no other replica rejoining (change_in_flight; invariant 5)',
    safety: false,
    why: 'here writes and admissions are serialized and an admission only adds a caught-up holder; the rule keeps one change of the eligible set at a time where they race',
  },

  // ---- promote-learner
  'promote-learner.is-learner': {
    rule: 'the node is a learner of the partition (not_a_learner)',
    safety: true,
  },
  'promote-learner.learner-admitted': {
    rule: 'the learner is admitted to the accepted history (not_admitted)',
    safety: true,
  },
  'promote-learner.learner-live': {
    rule: "the learner's node is live (node_down)",
    safety: false,
    why: 'a down follower never counts toward a confirm and stays in the eligible set with its disk: the raised W stops confirms sooner (availability), no confirmed message depends on the down copy',
  },
  'promote-learner.covers-confirmed': {
    rule: 'the learner is durable at the confirmed tail and close to the tail (not_caught_up)',
    safety: true,
  },
  'promote-learner.max-replication-factor': {
    rule: 'the replication factor stays at most 16 (above_maximum)',
    safety: false,
    why: "the contract's bound on the replication factor; W still follows from it",
  },

  // ---- owner handoff
  'close-admission.owner-live': {
    rule: 'the owner is live (node_down)',
    safety: false,
    why: 'unreachable on its own: a down owner always has a pending recovery, refused first',
  },
  'close-admission.no-change-in-flight': {
    rule: 'no learner and no leaving replica (change_in_flight)',
    safety: false,
    why: 'commit-owner checks every copy counted at commit time against the final boundary; a learner never counts and R stays eligible until removal',
  },
  'commit-owner.admission-closed': {
    rule: 'admission is closed (admission_open)',
    safety: false,
    why: 'unreachable on its own: with admission open there is no final boundary, so the certificate check refuses',
  },
  'commit-owner.certificate-matches': {
    rule: 'the certificate names the current epoch and final boundary (certificate_mismatch)',
    safety: false,
    why: "the catch-up check uses the cluster's own final boundary, not the certificate's",
  },
  'commit-owner.counted-follower': {
    rule: 'the new owner is a counted (unsuspended) follower (not_a_follower)',
    safety: true,
  },
  'commit-owner.new-owner-live': {
    rule: "the new owner's node is live (node_down)",
    safety: true,
  },
  'commit-owner.counted-caught-up': {
    rule: 'every counted copy is durable at the final boundary (not_caught_up)',
    safety: true,
  },
  'reopen-admission.admission-closed': {
    rule: 'admission is closed (admission_open)',
    safety: false,
    why: 'reopening an open partition changes nothing but the (absent) final boundary',
  },

  // ---- the cluster's own admission and recovery rules
  'admit.caught-up': {
    rule: 'a learner or rejoining replica is admitted only once close to the tail and holding every confirmed message',
    safety: true,
  },
  'admit.no-pending-recovery': {
    rule: 'nothing is admitted while a recovery is pending',
    safety: false,
    why: 'unreachable on its own: transfers run only while the partition is serving, never during a pending recovery',
  },
  'admit.admission-open': {
    rule: 'nothing is admitted while admission is closed for a handoff',
    safety: false,
    why: 'an admission only adds a caught-up holder to the eligible set, and commit-owner re-checks the counted copies at commit',
  },
  'rejoin.limit': {
    rule: 'at most W - 1 restarted followers rejoin at once (invariant 5)',
    safety: true,
  },
  'recovery.priority': {
    rule: 'a waiting recovery transfer takes a slot ahead of running rebalancing transfers, which pause',
    safety: false,
    why: 'slot order decides how fast copies are made, never which copies count: a liveness rule',
  },
  'recovery.seal-quorum': {
    rule: 'activation waits for E - W + 1 surviving eligible replicas to seal',
    safety: true,
  },
  'recovery.eligible-storage': {
    rule: 'only replicas on the storage instance the history names are eligible for the seal',
    safety: true,
  },
  'recovery.source-holds-most': {
    rule: 'the new owner continues from the sealed replica that holds most',
    safety: true,
  },
} satisfies Record<string, Mutant>;

export type MutantName = keyof typeof MUTANTS;
