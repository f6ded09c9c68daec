/**
 * The moves benchmark's floor: a workflow of a follower move's shape with nothing behind it (issue 20, item 3). One
 * local activity, three activities, two signals it waits for, four search-attribute upserts; the activities return at
 * once and no broker is read. Its p99 from start to close, 200 at once on the same server in the same run, is what
 * Temporal alone costs a move, so the moves' p99 overhead reads as a ratio to it. Bench code: no product worker runs it.
 */
import { condition, defineSignal, proxyActivities, proxyLocalActivities, setHandler, upsertSearchAttributes } from '@temporalio/workflow';
import { PhaseKey, PhaseSinceKey } from '../../rules/search-attributes';
import type { FloorActivities } from './activities';

export const floorSignal = defineSignal<[number]>('floorProgress');

const { floorRead } = proxyLocalActivities<FloorActivities>({ startToCloseTimeout: '60s' });
const { floorWrite } = proxyActivities<FloorActivities>({ startToCloseTimeout: '60s' });

export async function floorMove(): Promise<string> {
  let signals = 0;
  setHandler(floorSignal, () => void signals++);
  const phase = (name: string) => upsertSearchAttributes([{ key: PhaseKey, value: name }, { key: PhaseSinceKey, value: new Date() }]);
  phase('validating');
  await floorRead();
  phase('adding');
  await floorWrite('add-learner');
  phase('catching_up');
  await condition(() => signals >= 1);
  await floorWrite('swap');
  phase('removing');
  await condition(() => signals >= 2);
  await floorWrite('remove-leaving');
  return 'completed';
}
