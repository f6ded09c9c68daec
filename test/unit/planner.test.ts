import { describe, expect, it } from 'vitest';
import { DEFAULT_PLANNER_CONFIG, planNow, planToConvergence } from '../../planner';
import { input, ring } from './planner-topology';

const config = { ...DEFAULT_PLANNER_CONFIG };

describe('planner: a new empty node joins', () => {
  it('planNow starts follower moves onto the empty node, within the per-node limit', () => {
    const plan = planNow(input(ring(4, 1, 10)), config);
    expect(plan.idleReason).toBeNull();
    expect(plan.steps).toHaveLength(config.maxTransfersPerNode);
    for (const s of plan.steps) {
      expect(s.op).toBe('follower_move');
      expect(s.to).toBe('n4');
      expect(s.reason).toMatch(/sheds/);
    }
  });

  it('planToConvergence fills it until every node is within the threshold', () => {
    const plan = planToConvergence(input(ring(4, 1, 10)), config);
    expect(plan.spreadBefore).toBeGreaterThan(config.threshold);
    expect(plan.spreadAfter).toBeLessThanOrEqual(config.threshold);
    expect(plan.steps.filter((s) => s.op === 'follower_move').length).toBeGreaterThan(0);
    expect(plan.predictedMs).toBeGreaterThan(0);
    const again = planNow(input(ring(4, 1, 10)), config);
    expect(again.steps.length).toBeGreaterThan(0);
  });
});
