/**
 * The workflow clock for the decisions of executions started before patch `decide-on-timers` (and of
 * `followerMove` v1), which compared it right after local-activity reads: replaying their histories needs the
 * same comparisons. New executions decide on timers (see step.ts). Delete with the patch and with v1.
 */
export function legacyNow(): number {
  return Date.now();
}
