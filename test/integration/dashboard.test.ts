/**
 * The dashboard in a real browser: Debian's chromium driven by playwright-core, headless, on loopback only,
 * against the admin API on a reference cluster and the shared dev server (partitions q-520..q-539 and the
 * stream s-520 only).
 * Nothing is installed at run time: without /usr/bin/chromium the file fails in CI and is skipped locally with
 * the reason.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../scripts/temporal-cli';
import { call, startAdminFixture, TOKEN, type AdminFixture } from './admin-fixture';
import { temporalNamespace } from './helpers';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = path.join(PROJECT_ROOT, '.data', 'artifacts');
const present = fs.existsSync(CHROMIUM);
if (!present && !process.env.CI) {
  console.warn(`dashboard tests skipped: no browser at ${CHROMIUM} (install Debian's chromium: apt-get install -y chromium, or set CHROMIUM_PATH)`);
}

describe.skipIf(!present && !process.env.CI)('dashboard', () => {
  let f: AdminFixture;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    if (!present) throw new Error(`no browser at ${CHROMIUM}: .ci/run installs Debian's chromium (apt-get install -y chromium)`);
    // Transfers of about 3 MiB at 512 KiB/s: a move stays on screen for several seconds. The history is sampled
    // every second, so the charts have points within the test's moves.
    f = await startAdminFixture({ name: 'dashboard', partitions: ['q-520', 'q-521', 'q-522', 'q-523'], config: { transferBytesPerSec: 512 * 1024 }, historyIntervalMs: 1_000 });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
    page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await page.goto(`${f.admin.url}/#token=${TOKEN}`);
    await page.fill('#operator', 'dana');
    await page.dispatchEvent('#operator', 'change');
  });
  afterAll(async () => {
    await browser?.close();
    await f?.close();
  });

  it('shows every node of the cluster with its score bar, the mean and both thresholds, and each dimension against its band', async () => {
    await expect.poll(() => page.locator('.node.row').count(), { timeout: 30_000 }).toBe(5);
    expect(page.url()).not.toContain('token');
    const scores = (await call(f.admin.url, 'GET', '/api/nodes')).body as unknown as { nodes: { node: string; bands: Record<string, { inside: boolean }> }[] };
    for (const row of await page.locator('.node.row').all()) {
      expect(await row.locator('.bar .seg').count()).toBeGreaterThan(0);
      expect(await row.locator('.bar .mark.mean').count()).toBe(1);
      expect(await row.locator('.bar .mark.threshold').count()).toBe(2);
      expect(await row.textContent()).toMatch(/zone \S+cap 1/);
      // Replicas, owned partitions, disk and traffic, each marked as the API says whether it is inside its band.
      const id = await row.getAttribute('data-node');
      const bands = scores.nodes.find((n) => n.node === id)!.bands;
      for (const d of ['replicas', 'owned', 'disk', 'traffic']) {
        const cell = row.locator(`.bands .band[data-dimension="${d}"]`);
        expect(await cell.textContent()).toMatch(new RegExp(`^${d} [+-]\\d+%$`));
        expect(await cell.getAttribute('data-inside')).toBe(String(bands[d]!.inside));
      }
    }
    await expect.poll(() => page.textContent('#summary')).toMatch(/5\/5 nodes live/);
  });

  it('requests a move from the page; it appears with its progress and completes', async () => {
    const topology = await f.cluster.client.topology();
    const p = topology.partitions.find((x) => x.id === 'q-520')!;
    const to = topology.nodes.find((n) => ![p.owner, ...p.followers].includes(n.id))!.id;
    await page.selectOption('#move-form select[name=kind]', 'follower-move');
    await page.fill('#move-form input[name=partition]', 'q-520');
    await page.fill('#move-form input[name=from]', p.followers[0]!);
    await page.fill('#move-form input[name=to]', to);
    await page.fill('#move-form input[name=reason]', 'fill the quiet node');
    await page.click('#request-move');
    await expect.poll(() => page.textContent('#message')).toMatch(/moves: started/);

    const row = page.locator('.move.row[data-partition="q-520"]');
    await row.waitFor({ timeout: 30_000 });
    expect(await row.textContent()).toContain(`${p.followers[0]} → ${to}`);
    expect(await row.locator('a').getAttribute('href')).toBe(`http://127.0.0.1:8233/namespaces/${temporalNamespace()}/workflows/reconfigure-q-520`);
    await expect.poll(() => row.locator('.progress > div').evaluate((d) => parseFloat((d as unknown as { style: { width: string } }).style.width)), { timeout: 60_000 }).toBeGreaterThan(0);
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-move.png'), fullPage: true });

    await page.locator('.ended.row[data-partition="q-520"][data-outcome="completed"]').waitFor({ timeout: 120_000 });
    expect(await row.count()).toBe(0);
    const audit = (await call(f.admin.url, 'GET', '/api/audit')).body.entries as { actor: string; source: string; action: string; reason: string; outcome: string }[];
    expect(audit[0]).toMatchObject({ actor: 'dana', source: 'dashboard', action: 'follower-move', reason: 'fill the quiet node', outcome: 'ok' });
  });

  it("fills a running move's bar with the bytes it copied, though the page first looks when the copy is well under way", async () => {
    // About 8 MiB to copy (1,000 messages of 8 KiB, published slowly): some 16 s at 512 KiB/s.
    await f.cluster.client.createPartition({ id: 'q-524', replicas: ['n1', 'n2', 'n3'], initialMessages: 1_000, messageBytes: 8 * 1024, publishRate: 2 });
    // No page polls the admin service while the copy starts: what it knows of the move it learned by itself.
    await page.goto('about:blank');
    const started = await call(f.admin.url, 'POST', '/api/moves', { body: { kind: 'follower-move', partition: 'q-524', from: 'n2', to: 'n4', reason: 'progress bar check' } });
    expect(started.status).toBe(202);
    const left = async () => (await f.cluster.client.syncBudget()).transfers.find((t) => t.partition === 'q-524' && t.node === 'n4')?.bytesRemaining;
    let most = 0;
    await expect
      .poll(async () => {
        const now = await left();
        most = Math.max(most, now ?? 0);
        return now !== undefined && now <= most * 0.55;
      }, { timeout: 60_000, interval: 100 })
      .toBe(true);

    await page.goto(`${f.admin.url}/#token=${TOKEN}`);
    const row = page.locator('.move.row[data-partition="q-524"]');
    await row.waitFor({ timeout: 10_000 });
    const fill = await row.locator('.progress > div').evaluate((d) => parseFloat((d as unknown as { style: { width: string } }).style.width));
    const copied = 100 * (1 - (await left())! / most);
    // The broker's figure is a moment ahead of the move's own report the bar is drawn from.
    expect(fill).toBeGreaterThan(35);
    expect(Math.abs(fill - copied)).toBeLessThan(15);
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-progress.png'), fullPage: true });
    await page.locator('.ended.row[data-partition="q-524"][data-outcome="completed"]').waitFor({ timeout: 120_000 });
  });

  it("charts the last hour from the moves that ran, and shows a node's partitions, moves and score over time", async () => {
    const chart = (name: string) => page.locator(`.chart[data-chart="${name}"]`);
    const max = async (name: string) => JSON.parse((await chart(name).getAttribute('data-max')) ?? '{}') as Record<string, number>;
    await expect.poll(async () => (await max('moves')).completed ?? 0, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
    expect((await max('moves')).running).toBeGreaterThanOrEqual(1);
    // A 8 MiB copy over some 16 s: at least 100 KiB/s in a second's sample.
    expect((await max('bytes'))['bytes/s']).toBeGreaterThan(100 * 1024);
    expect(Number(await chart('spread').getAttribute('data-points'))).toBeGreaterThan(5);
    const spread = await max('spread');
    expect(spread.band).toBeCloseTo(0.1);
    expect(spread.spread).toBeGreaterThan(0);
    expect(Object.keys(spread)).toEqual(['spread', 'band', 'owned worst', 'followed worst', 'history worst', 'traffic worst', 'sync worst']);
    // Each chart drew on its canvas: lines, not only the empty frame.
    for (const name of ['spread', 'bytes', 'moves', 'recovery']) {
      const inked = await chart(name).locator('canvas').evaluate((c) => {
        const canvas = c as unknown as { width: number; height: number; getContext(t: '2d'): { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } } };
        const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
        let n = 0;
        for (let i = 3; i < data.length; i += 4) if (data[i]! > 0) n++;
        return n;
      });
      expect(inked, name).toBeGreaterThan(500);
    }

    await page.click('.node.row[data-node="n4"]');
    const detail = page.locator('#node-detail');
    await expect.poll(() => detail.isVisible()).toBe(true);
    await expect.poll(() => page.locator('#detail-moves .detail-move.ended[data-partition="q-524"]').count(), { timeout: 10_000 }).toBe(1);
    expect(await page.getAttribute('#detail-moves .detail-move.ended[data-partition="q-524"]', 'data-direction')).toBe('in');
    expect(await page.textContent('#detail-partitions [data-partition="q-524"]')).toBe('q-524 follower');
    expect(await page.textContent('#detail-summary')).toMatch(/score \d\.\d{3} \(mean \d\.\d{3}, band /);
    expect(Number(await chart('node').getAttribute('data-points'))).toBeGreaterThan(5);
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-history.png'), fullPage: true });
    await page.click('#detail-close');
    expect(await detail.isVisible()).toBe(false);
  });

  it('pause shows the banner with who and why; resume clears it', async () => {
    await page.fill('#pause-form input[name=reason]', 'investigating latency');
    await page.click('#pause');
    await expect.poll(() => page.locator('#banner').isVisible(), { timeout: 10_000 }).toBe(true);
    expect(await page.textContent('#banner')).toMatch(/Rebalancing is paused by dana: investigating latency/);
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-paused.png'), fullPage: true });
    await page.fill('#resume-form input[name=reason]', 'latency explained');
    await page.click('#resume');
    await expect.poll(() => page.locator('#banner').isVisible(), { timeout: 10_000 }).toBe(false);
    // Both are marked on the history with who and why.
    await expect.poll(() => page.locator('#markers .marker').allTextContents(), { timeout: 15_000 }).toEqual([
      expect.stringMatching(/paused by dana \(dashboard\): investigating latency$/),
      expect.stringMatching(/resumed by dana \(dashboard\): latency explained$/),
    ]);
  });

  it('drain shows the refusal of a node holding a stream copy; with "queues only" the drain starts', async () => {
    await f.cluster.client.createPartition({ id: 's-520', kind: 'stream', replicas: ['n1', 'n2', 'n3'] });
    await page.fill('#drain-form input[name=node]', 'n2');
    await page.fill('#drain-form input[name=reason]', 'retire n2');
    await page.click('#drain');
    await expect.poll(() => page.textContent('#message'), { timeout: 10_000 }).toMatch(/^refused \(unmovable_copies\): n2 holds a copy of the stream s-520/);
    expect((await f.cluster.client.topology()).nodes.find((n) => n.id === 'n2')!.draining).toBe(false);
    await page.check('#drain-queues-only');
    await page.click('#drain');
    await expect.poll(() => page.textContent('#message'), { timeout: 10_000 }).toBe('drain: started');
    const audit = (await call(f.admin.url, 'GET', '/api/audit')).body.entries as { action: string; params: Record<string, unknown>; outcome: string }[];
    expect(audit[0]).toMatchObject({ action: 'drain', params: { queuesOnly: true }, outcome: 'ok' });
    // The form clears once the page has refreshed after the action.
    await expect.poll(() => page.isChecked('#drain-queues-only'), { timeout: 10_000 }).toBe(false);
  });

  it('pins a partition and excludes a node from the page: listed with who and why, the node marked; unpin and include lift them', async () => {
    await page.fill('#pin-form input[name=partition]', 'q-521');
    await page.fill('#pin-form input[name=reason]', 'consumer audit');
    await page.click('#pin');
    await expect.poll(() => page.locator('#holds .hold.pinned').count(), { timeout: 10_000 }).toBe(1);
    await page.fill('#exclude-form input[name=node]', 'n3');
    await page.fill('#exclude-form input[name=reason]', 'burn-in');
    await page.click('#exclude');
    await expect.poll(() => page.locator('#holds .hold.excluded').count(), { timeout: 10_000 }).toBe(1);
    expect(await page.textContent('#holds .hold.pinned')).toMatch(/^q-521pinned by dana since \S+: consumer audit/);
    expect(await page.textContent('#holds .hold.excluded')).toMatch(/^n3excluded by dana since \S+: burn-in/);
    await expect.poll(() => page.locator('.node.row.excluded').count(), { timeout: 10_000 }).toBe(1);
    expect(await page.locator('.node.row.excluded').getAttribute('data-node')).toBe('n3');
    expect(await page.textContent('.node.row.excluded .badge.excluded')).toBe('excluded');
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-pinned.png'), fullPage: true });

    await page.fill('#holds .hold.pinned input[name=reason]', 'audit done');
    await page.click('#holds .hold.pinned button');
    await expect.poll(() => page.locator('#holds .hold.pinned').count(), { timeout: 10_000 }).toBe(0);
    await page.fill('#holds .hold.excluded input[name=reason]', 'burn-in done');
    await page.click('#holds .hold.excluded button');
    await expect.poll(() => page.locator('.node.row.excluded').count(), { timeout: 10_000 }).toBe(0);
    expect(await f.deps.rebalancer.status()).toMatchObject({ pinned: [], excluded: [] });
    const audit = (await call(f.admin.url, 'GET', '/api/audit')).body.entries as { actor: string; source: string; action: string }[];
    expect(audit.filter((e) => e.actor === 'dana' && e.source === 'dashboard').map((e) => e.action).slice(0, 4).reverse()).toEqual(['pin', 'exclude', 'unpin', 'include']);
  });

  it('refuses a forged cross-site action', async () => {
    // A page on another origin tries a form post and fetches with and without the token header.
    const admin = f.admin.url;
    const evil = http.createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(`<!doctype html><form id="f" method="POST" action="${admin}/api/pause" enctype="text/plain">
        <input name='{"reason":"forged","x":"' value='"}'></form>
        <script>
          const results = {};
          Promise.all([
            fetch('${admin}/api/pause', { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{"reason":"forged"}' })
              .then((r) => (results.noCors = r.type), (e) => (results.noCors = 'error')),
            fetch('${admin}/api/pause', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ${TOKEN}' }, body: '{"reason":"forged"}' })
              .then((r) => (results.withToken = r.status), (e) => (results.withToken = 'blocked')),
          ]).then(() => { console.log(JSON.stringify(results)); document.getElementById('f').submit(); });
        </script>`);
    });
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
    const statuses: number[] = [];
    const forgedPage = await browser.newPage();
    let fetched: { noCors?: string; withToken?: number | string } = {};
    // The browser logs its own CORS errors to the console too; the page's one line is the JSON object.
    forgedPage.on('console', (m) => {
      if (m.type() === 'log' && m.text().startsWith('{')) fetched = JSON.parse(m.text()) as typeof fetched;
    });
    forgedPage.on('response', (r) => {
      if (r.url() === `${admin}/api/pause`) statuses.push(r.status());
    });
    try {
      await forgedPage.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
      // The no-cors fetch and the form post reach the server and are refused there (403 cross-site); the fetch
      // with the token header needs a preflight the server never grants, so it never leaves the browser.
      await expect.poll(() => statuses.length, { timeout: 15_000 }).toBe(2);
      expect(statuses).toEqual([403, 403]);
      expect(fetched).toEqual({ noCors: 'opaque', withToken: 'blocked' });
    } finally {
      await forgedPage.close();
      await new Promise((r) => evil.close(r));
    }
    expect((await f.deps.rebalancer.status()).state).toBe('running');
    const audit = (await call(f.admin.url, 'GET', '/api/audit')).body.entries as { reason: string }[];
    expect(audit.some((e) => e.reason === 'forged')).toBe(false);
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard.png'), fullPage: true });
  });
});
