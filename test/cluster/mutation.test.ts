/**
 * Mutation score of the reference cluster's preconditions (cluster/sim/mutants.ts). For every safety-relevant
 * mutant, model sequences (model-driver.ts) run with that one rule removed until the mutant is killed or the
 * budget runs out. Killed means independent evidence: a breach of invariant 1, 2, 3 or 5 found by the checker
 * (never the invariant-4 report the disabled branch records about itself), a liveness failure once faults
 * stop, a model property failing (a refused write changed something, a generation or W moved wrongly), or
 * the mutated cluster corrupting its own state so that it throws. Every safety mutant must die in every run.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MUTANTS, type MutantName } from '../../cluster/sim/mutants';
import type { ClusterSim } from '../../cluster/sim/sim';
import { emptyCoverage, ModelPropertyError, runScenario, scenarioArb, type Scenario } from './model-driver';

/** Fixed, so that every run kills the same way (docs/testing.md, "Mutation score", has other seeds). */
const SEED = Number(process.env.CLUSTER_MODEL_SEED ?? 2);
const BUDGET = 1_000;

type Verdict = 'breach' | 'liveness' | 'property' | 'crash';

/** The invariant-4 breach is recorded by remove-leaving itself, on the very path its mutant opens. */
const SELF_REPORTED = new Set([4]);

function verdict(s: Scenario, mutant: MutantName | null): Verdict | null {
  let sim: ClusterSim | undefined;
  let thrown: unknown;
  let liveness: string | null = null;
  try {
    liveness = runScenario(s, emptyCoverage(), (created) => {
      sim = created;
      if (mutant) created.mutants.add(mutant);
    }).liveness;
  } catch (e) {
    thrown = e;
  }
  // A breach recorded before the cluster threw still counts: it came first.
  if (sim?.invariants().breaches.some((b) => !SELF_REPORTED.has(b.invariant))) return 'breach';
  if (liveness) return 'liveness';
  if (thrown instanceof ModelPropertyError) return 'property';
  if (thrown) return 'crash';
  return null;
}

describe('mutation score of the cluster preconditions', () => {
  it('kills every safety-relevant mutant with independent evidence', () => {
    const scenarios = fc.sample(scenarioArb(), { numRuns: BUDGET, seed: SEED });
    // A sequence the unmutated cluster fails is no evidence against a mutant (the model test reports it).
    const unmutated = new Map<number, Verdict | null>();
    const baseline = (i: number) => {
      if (!unmutated.has(i)) unmutated.set(i, verdict(scenarios[i]!, null));
      return unmutated.get(i)!;
    };
    const safety = (Object.keys(MUTANTS) as MutantName[]).filter((m) => MUTANTS[m].safety);
    const lines: string[] = [];
    const survivors: MutantName[] = [];
    for (const m of safety) {
      let killed: { at: number; by: Verdict } | null = null;
      for (let i = 0; i < scenarios.length && !killed; i++) {
        const by = verdict(scenarios[i]!, m);
        if (by && !baseline(i)) killed = { at: i + 1, by };
      }
      if (!killed) survivors.push(m);
      lines.push(`  ${m}: ${killed ? `killed by ${killed.by} after ${killed.at} sequence(s)` : `SURVIVED ${BUDGET} sequences`}`);
    }
    const failing = [...unmutated].filter(([, v]) => v).map(([i, v]) => `sequence ${i + 1} (${v})`);
    console.log(`mutation score: ${safety.length - survivors.length} of ${safety.length} safety mutants killed (seed ${SEED})\n${lines.join('\n')}`);
    expect(failing, 'the unmutated cluster fails these sequences too').toEqual([]);
    expect(survivors).toEqual([]);
  });
});
