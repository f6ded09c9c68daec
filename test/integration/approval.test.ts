/**
 * Propose mode end to end (REBALANCER_MODE=propose, set in the loop's settings here): a real Temporal dev server, a
 * reference cluster over HTTP and the project's worker with its loop. A node joins; the loop publishes a plan and
 * starts nothing; an approval starts exactly the plan's steps, refusing the one made stale meanwhile with why; a
 * used, superseded or unknown plan id is refused with its state, through the CLI and the admin API.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { chromium } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AuditLog, auditFile } from '../../operations/audit';
import { startAdmin, type RunningAdmin } from '../../admin/server';
import { createAdminDeps } from '../../admin/wiring';
import { rebalancerStatus } from '../../operations/rebalancer';
import { DEFAULT_PLANNER_CONFIG } from '../../planner';
import { relayScope } from '../../operations/relay';
import { createRebalancerWorker, type RebalancerWorker } from '../../worker/worker';
import type { ApprovalResult, ProposedPlan, RebalancerSettings, RebalancerStatus, RefreshResult } from '../../rules/definitions';
import { holders } from '../../rules/rebalancer-rules';
import { call, TOKEN } from './admin-fixture';
import { cli, connectClient, eventually, logger, replayAndKeep, startTestCluster, temporalAddress, temporalEnv, temporalNamespace, TEST_RELAY_TUNING, type TestCluster } from './helpers';

const taskQueue = `approval-${process.pid}`;
const SETTINGS: RebalancerSettings = {
  planner: { ...DEFAULT_PLANNER_CONFIG, maxTransfersPerNode: 2, maxTransfersPerCluster: 4, nodeCooldownMs: 1_000, partitionCooldownMs: 2_000 },
  tickMs: 500,
  // Small, so the plan and the approved steps are carried across continue-as-new during the file.
  ticksPerRun: 10,
  mode: 'propose',
};

let cluster: TestCluster;
let client: Client;
let w: RebalancerWorker;
let running: Promise<void>;
let scope: string;
let admin: RunningAdmin;
let audit: AuditLog;
let dataDir: string;

beforeAll(async () => {
  cluster = await startTestCluster({ recoveryDelayMs: 4_000 }, { nodes: 0, partitions: 0, streams: 0 });
  for (const id of ['n1', 'n2', 'n3']) await cluster.client.joinNode(id, 1, 'z1');
  for (let i = 0; i < 6; i++) await cluster.client.createPartition({ id: `q-${700 + i}`, replicas: [0, 1, 2].map((k) => `n${((i + k) % 3) + 1}`) });
  client = await connectClient();
  w = await createRebalancerWorker({ temporal: { address: temporalAddress(), namespace: temporalNamespace(), taskQueue }, clusterUrl: cluster.url, logger, relayTuning: TEST_RELAY_TUNING, rebalancer: SETTINGS });
  running = w.run();
  scope = relayScope(cluster.url, taskQueue);
  Object.assign(process.env, { ...temporalEnv(), CLUSTER_URL: cluster.url, TEMPORAL_TASK_QUEUE: taskQueue });
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'approval-'));
  audit = new AuditLog(auditFile(dataDir));
  const deps = createAdminDeps({ client, cluster: cluster.client, taskQueue, planner: SETTINGS.planner });
  admin = await startAdmin({ deps, audit, token: TOKEN, host: '127.0.0.1', port: 0, temporalUiUrl: 'http://127.0.0.1:8233', namespace: temporalNamespace() });
});

afterAll(async () => {
  await admin?.close();
  audit?.close();
  if (w) {
    await client.workflow.getHandle(w.rebalancerWorkflowId!).terminate('test file done').catch(() => undefined);
    w.shutdown();
    await running;
  }
  await cluster?.close();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

afterEach(async () => {
  expect((await cluster.client.invariants()).breaches).toEqual([]);
});

const status = (): Promise<RebalancerStatus> => rebalancerStatus(client, scope);

/** Partitions with a reconfiguration the broker shows in flight. */
async function busy(): Promise<string[]> {
  const t = await cluster.client.topology();
  return t.partitions.filter((p) => p.learners.length > 0 || p.leaving || p.admission === 'closed').map((p) => p.id);
}

async function pendingPlan(what: string, other?: string): Promise<ProposedPlan> {
  return eventually(what, async () => {
    const s = await status();
    const plan = s.approval?.pending;
    if (plan && plan.id !== other) return plan;
    throw new Error(`no plan pending; last plan: ${s.lastPlan?.idleReason ?? '-'}`);
  });
}

let plan: ProposedPlan;
let approval: ApprovalResult;
let refreshed: Omit<RefreshResult, 'status'>;

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

describe('rebalancer loop in propose mode', () => {
  it('publishes its plan when a node joins, keeps it, and starts nothing', async () => {
    await eventually('the loop at rest before n4 joins', async () => ((await status()).ticks >= 2 ? true : undefined), 30_000);
    expect((await status()).approval?.pending ?? null).toBeNull();
    await cluster.client.joinNode('n4', 1, 'z1');
    plan = await pendingPlan('a plan after n4 joined');
    const generation = (await cluster.client.topology()).generation;
    expect(plan.id).toMatch(/^p-[0-9a-f]{8}$/);
    expect(plan.generation).toBeGreaterThan(0);
    expect(plan.generation).toBeLessThanOrEqual(generation);
    expect(plan.steps.filter((s) => s.op === 'follower_move' && s.to === 'n4').length).toBeGreaterThanOrEqual(2);
    expect(plan.bytes).toBe(plan.steps.filter((s) => s.op === 'follower_move').reduce((a, s) => a + s.bytes, 0));
    expect(plan.bytes).toBeGreaterThan(0);
    expect(plan.predictedMs).toBeGreaterThan(0);

    // Ticks pass, across continue-as-new: the plan stays the same and nothing starts.
    const ticks = (await status()).ticks;
    const later = await eventually('more ticks than one run holds', async () => {
      const s = await status();
      return s.ticks >= ticks + SETTINGS.ticksPerRun + 2 ? s : undefined;
    });
    expect(later.approval?.pending?.id).toBe(plan.id);
    expect(later.moves.started).toBe(0);
    expect(later.inFlight).toEqual([]);
    expect(await busy()).toEqual([]);
    expect(later.lastPlan?.idleReason).toMatch(new RegExp(`^waiting for approval of plan ${plan.id} \\(made at .* on generation ${plan.generation}, ${plan.steps.length} step\\(s\\)\\)`));

    // `status` and the admin API show it; the dashboard reads the latter.
    const shown = await cli('status');
    expect(shown.out).toMatch(/^mode: +propose/m);
    expect(shown.out).toContain(`plan ${plan.id}: made at ${new Date(plan.madeAt).toISOString()} on generation ${plan.generation}; ${plan.steps.length} step(s)`);
    expect(shown.out).toContain(`rebalancer approve ${plan.id} --reason`);
    const api = await call(admin.url, 'GET', '/api/status');
    expect(api.body.rebalancer).toMatchObject({ mode: 'propose', pendingPlan: { id: plan.id, generation: plan.generation, bytes: plan.bytes, steps: plan.steps } });
  });

  it('approve starts exactly the plan steps under the limits; a step whose partition changed is refused as stale with why', async () => {
    // Change one step's partition behind the plan's back: a learner added and dropped again leaves its copies as
    // they were, under a newer generation.
    const staled = plan.steps.find((s) => s.op === 'follower_move')!;
    const before = (await cluster.client.partition(staled.partition)).partition;
    const added = await cluster.client.write(staled.partition, 'add-learner', { expectedGeneration: before.generation, idempotencyKey: 'approval-test-add', node: staled.to });
    expect(added.ok).toBe(true);
    const dropped = await cluster.client.write(staled.partition, 'drop-learner', { expectedGeneration: added.ok ? added.partition.generation : 0, idempotencyKey: 'approval-test-drop', node: staled.to });
    expect(dropped.ok).toBe(true);
    const after = dropped.ok ? dropped.partition.generation : 0;

    const approved = await cli('approve', plan.id, '--reason', 'reviewed in the change meeting', '--by', 'alice', '--json');
    expect(approved.code).toBe(0);
    approval = JSON.parse(approved.out) as ApprovalResult;
    const sameSteps = plan.steps.filter((s) => s.partition === staled.partition);
    expect(approval.stale.map((x) => x.step)).toEqual(sameSteps);
    expect(approval.stale[0]!.reason).toBe(`${staled.partition} changed since the plan was made (generation ${before.generation} -> ${after})`);
    expect(approval.accepted).toEqual(plan.steps.filter((s) => s.partition !== staled.partition));

    // Every accepted step starts, over as many ticks as the limits need, and no other.
    const done = await eventually(
      'the approved steps to end',
      async () => {
        const s = await status();
        const ended = s.moves.completed + s.moves.aborted + s.moves.cancelled;
        if (s.moves.started === approval.accepted.length && ended === s.moves.started && s.approval?.approved === null) return s;
        throw new Error(`${s.moves.started} started, ${ended} ended, ${s.approval?.approved?.steps.length ?? 0} approved yet to start; last plan: ${s.lastPlan?.idleReason ?? 'started moves'}`);
      },
      150_000,
    );
    expect(done.moves.aborted).toBe(0);
    const t = await cluster.client.topology();
    for (const s of approval.accepted.filter((x) => x.op === 'follower_move')) {
      const p = t.partitions.find((x) => x.id === s.partition)!;
      expect(holders(p)).toContain(s.to);
      expect(holders(p)).not.toContain(s.from);
    }
    for (const s of approval.accepted.filter((x) => x.op === 'owner_handoff')) expect(t.partitions.find((x) => x.id === s.partition)!.owner).toBe(s.to);
    // The stale step's partition was left as it was.
    expect(holders(t.partitions.find((p) => p.id === staled.partition)!).sort()).toEqual(holders(before).sort());
    // A run that held the plan, took the approval and started its steps, then continued as new, replays under the
    // current code, and is kept (SAVE_HISTORIES=1) so every later change of the loop replays propose mode too.
    const approvedRun = await eventually('a run with the approval that continued as new', async () => {
      for await (const run of client.workflow.list({ query: `WorkflowId = "${w.rebalancerWorkflowId}" AND ExecutionStatus = "ContinuedAsNew"` })) {
        const history = JSON.stringify(await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory());
        if (history.includes('approvePlan')) return run.runId;
      }
      return undefined;
    });
    await replayAndKeep(client, w.rebalancerWorkflowId!, 'rebalancer-propose-approved', approvedRun);
    // The moves say who approved them, in the Temporal UI.
    const started = await client.workflow.getHandle(`reconfigure-${approval.accepted[0]!.partition}`).describe();
    expect(await started.staticDetails()).toMatch(new RegExp(`; approved in plan ${plan.id} by alice: reviewed in the change meeting$`));
  });

  it('a used, a superseded and an unknown plan id are refused with their state; a refresh supersedes the pending plan', async () => {
    const used = await cli('approve', plan.id, '--reason', 'again', '--json');
    expect(used.code).toBe(1);
    expect(JSON.parse(used.out)).toMatchObject({
      ok: false,
      code: 'plan_used',
      message: expect.stringMatching(new RegExp(`^plan ${plan.id} was already approved at \\S+ by alice \\(reviewed in the change meeting\\): ${approval.accepted.length} step\\(s\\) accepted, ${approval.stale.length} refused as stale`)),
    });
    const unknown = await cli('approve', 'p-00000000', '--reason', 'typo', '--json');
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.out)).toMatchObject({ ok: false, code: 'unknown_plan', message: expect.stringMatching(/^unknown plan p-00000000: /) });
    expect((await cli('approve', 'q-1', '--reason', 'x')).code).toBe(2);
    expect((await cli('approve', '--reason', 'x')).code).toBe(2);

    // The step left over (the stale one) is proposed again; a refresh through the admin API supersedes that plan.
    const next = await pendingPlan('the next plan', plan.id);
    const reply = await call(admin.url, 'POST', '/api/plan/refresh', { body: { reason: 'after the meeting' }, headers: { 'x-operator': 'bob' } });
    expect(reply.status).toBe(200);
    const r = (refreshed = reply.body as unknown as Omit<RefreshResult, 'status'>);
    expect(r.superseded).toBe(next.id);
    const superseded = await call(admin.url, 'POST', `/api/plan/${next.id}/approve`, { body: { reason: 'late' }, headers: { 'x-operator': 'carol' } });
    expect(superseded.status).toBe(409);
    expect(superseded.body).toMatchObject({
      error: 'plan_used',
      message: expect.stringMatching(new RegExp(`^plan ${next.id} was superseded at \\S+ by ${r.plan ? `plan ${r.plan.id}` : 'no plan'} .*\\(refresh by bob: after the meeting\\)`)),
    });
    const entries = audit.list({ limit: 10 });
    expect(entries.find((e) => e.action === 'approve' && e.target === next.id)).toMatchObject({ actor: 'carol', reason: 'late', outcome: expect.stringMatching(/^refused \(plan_used\)/) });
    expect(entries.find((e) => e.action === 'refresh plan')).toMatchObject({ actor: 'bob', outcome: 'ok' });
    // Nothing started without an approval.
    expect((await status()).moves.started).toBe(approval.accepted.length);
  });

  it.skipIf(!fs.existsSync(CHROMIUM) && !process.env.CI)('the dashboard shows the pending plan and approves it with a reason', async () => {
    expect(refreshed.plan).not.toBeNull();
    const pending = refreshed.plan!;
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
    try {
      const page = await browser.newPage();
      await page.goto(`${admin.url}/#token=${TOKEN}`);
      await page.fill('#operator', 'erin');
      await page.dispatchEvent('#operator', 'change');
      await expect.poll(() => page.locator('#plan').isVisible(), { timeout: 10_000 }).toBe(true);
      // The first render may show the admin service's last answer (a busy loop answers late: `as of`); the next poll
      // brings the plan pending now.
      await expect.poll(() => page.textContent('#plan-summary'), { timeout: 10_000 }).toContain(`${pending.id} · made on generation ${pending.generation}`);
      const summary = await page.textContent('#plan-summary');
      expect(summary).toContain(`${pending.steps.length} step(s)`);
      expect(await page.locator('#plan-steps .step.row').count()).toBe(pending.steps.length);
      // The reason is required, as on the other buttons: without it nothing is sent.
      await page.click('#approve');
      expect((await status()).approval?.pending?.id).toBe(pending.id);
      await page.fill('#approve-form input[name=reason]', 'looks right');
      await page.click('#approve');
      await expect.poll(() => page.textContent('#message'), { timeout: 10_000 }).toMatch(new RegExp(`^approved ${pending.id}: \\d+ step\\(s\\) start`));
    } finally {
      await browser.close();
    }
    const entry = audit.list({ limit: 5 }).find((e) => e.action === 'approve' && e.target === pending.id);
    expect(entry).toMatchObject({ actor: 'erin', source: 'dashboard', reason: 'looks right', outcome: 'ok' });
    const past = (await status()).approval?.past.find((p) => p.id === pending.id);
    expect(past).toMatchObject({ state: 'approved', approved: { by: 'erin', reason: 'looks right' } });
  });
});
