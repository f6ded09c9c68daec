/**
 * The workflow clock for the decisions of executions started before patch `decide-on-timers`, which compared it right after local-activity reads: replaying their histories needs the
 * same comparisons. New executions decide on timers (see step.ts). Delete with the patch.
 */
export function legacyNow(): number {
  return Date.now();
}
