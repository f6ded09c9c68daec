// The dashboard: polls the admin API and renders one page of nodes and one page of moves at a time, so it stays
// usable with thousands of either, and the last hour's charts (uPlot, served from node_modules by the admin
// server). Actions send the token in a header (never a cookie) and a reason each.
import uPlot from '/vendor/uPlot.esm.js';

const PAGE = 50;
const POLL_MS = 2000;
// The history is sampled every few seconds: reading it every poll would redraw the same points.
const HISTORY_POLL_MS = 5000;
const DIMENSIONS = ['owned', 'followed', 'history', 'traffic', 'sync'];
// The per-dimension bands the planner brings every node inside (replicas, owned partitions, disk, traffic).
const BANDS = ['replicas', 'owned', 'disk', 'traffic'];
const COLORS = { owned: '#3b6fd8', followed: '#7fa8f0', history: '#8a6bd1', traffic: '#e0a030', sync: '#d05050' };
const OUTCOMES = { completed: '#2a9d4a', cancelled: '#687083', aborted: '#c33', other: '#8a6bd1' };

const $ = (id) => document.getElementById(id);
const state = { nodesOffset: 0, movesOffset: 0, polling: false, holds: null, historyAt: 0, intervalMs: 5000, markers: [], charts: {}, detail: null };

// The printed dashboard URL carries the token in the fragment, which never reaches a server; keep it for the tab.
const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.get('token')) {
  sessionStorage.setItem('admin-token', fragment.get('token'));
  history.replaceState(null, '', location.pathname);
}
$('token').value = sessionStorage.getItem('admin-token') ?? '';
$('operator').value = localStorage.getItem('admin-operator') ?? '';
$('token').addEventListener('change', () => sessionStorage.setItem('admin-token', $('token').value));
$('operator').addEventListener('change', () => localStorage.setItem('admin-operator', $('operator').value));

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'style') Object.assign(node.style, v);
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else node[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

function bytes(n) {
  if (n === null || n === undefined) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

async function getJson(path) {
  const headers = {};
  const token = $('token').value;
  if (token) headers.authorization = `Bearer ${token}`;
  // The first poll's replies, asked for by index.html before this script arrived, with the same token.
  const early = window.firstReads?.token === token ? window.firstReads.replies.get(path) : undefined;
  window.firstReads?.replies.delete(path);
  const res = await (early ?? fetch(path, { headers }));
  const body = await res.json();
  if (!res.ok) throw new Error(body.message ?? res.statusText);
  return body;
}

function show(kind, text) {
  const box = $('message');
  box.hidden = false;
  box.className = kind;
  box.textContent = text;
}

// `done` words a success from the reply, for actions whose reply says more than done (an approval's stale steps).
async function act(path, body, done) {
  const headers = { 'content-type': 'application/json', 'x-admin-source': 'dashboard', authorization: `Bearer ${$('token').value}` };
  if ($('operator').value) headers['x-operator'] = $('operator').value;
  const res = await fetch(path, { method: 'POST', headers, body: JSON.stringify(body) });
  const reply = await res.json().catch(() => ({}));
  if (!res.ok) show('error', `refused (${reply.error ?? res.status}): ${reply.message ?? res.statusText}`);
  else show('ok', done ? done(reply) : `${path.replace('/api/', '')}: ${res.status === 202 ? 'started' : 'done'}`);
  await refresh();
  return res.ok;
}

function formData(form) {
  return Object.fromEntries([...new FormData(form).entries()].filter(([, v]) => v !== ''));
}

function onSubmit(id, handler) {
  $(id).addEventListener('submit', async (event) => {
    event.preventDefault();
    if (await handler(formData(event.target), event.submitter)) event.target.reset();
  });
}

onSubmit('pause-form', ({ reason }) => act('/api/pause', { reason }));
onSubmit('resume-form', ({ reason }) => act('/api/resume', { reason }));
// The plan id the approve button approves: the one shown, so a plan replaced meanwhile is refused, not approved blind.
onSubmit('approve-form', ({ reason }) =>
  act(`/api/plan/${encodeURIComponent($('plan').dataset.plan)}/approve`, { reason }, (r) =>
    [`approved ${r.planId}: ${r.accepted.length} step(s) start under the transfer limits`, ...r.stale.map((s) => `stale ${s.step.partition} (${s.step.from} → ${s.step.to}): ${s.reason}`)].join('; '),
  ),
);
onSubmit('refresh-form', ({ reason }) => act('/api/plan/refresh', { reason }, (r) => (r.plan ? `new plan ${r.plan.id}` : `no plan: ${r.idleReason}`)));
onSubmit('cancel-form', ({ partition, reason }) => act(`/api/moves/${encodeURIComponent(partition)}/cancel`, { reason }));
onSubmit('drain-form', ({ node, reason, queuesOnly }, submitter) =>
  submitter?.value === 'undrain' ? act('/api/undrain', { node, reason }) : act('/api/drain', { node, reason, queuesOnly: queuesOnly === 'on' }));
onSubmit('pin-form', ({ partition, reason }) => act('/api/pin', { partition, reason }));
onSubmit('exclude-form', ({ node, reason }) => act('/api/exclude', { node, reason }));
onSubmit('move-form', ({ kind, partition, from, to, reason }) => {
  const request = { kind, partition, reason };
  if (kind === 'grow') Object.assign(request, { to });
  else if (kind === 'replace') Object.assign(request, { lost: from, with: to });
  else Object.assign(request, { from, to });
  return act('/api/moves', request);
});

function pager(prefix, key, total) {
  $(`${prefix}-prev`).disabled = state[key] === 0;
  $(`${prefix}-next`).disabled = state[key] + PAGE >= total;
  const last = Math.min(total, state[key] + PAGE);
  $(`${prefix}-count`).textContent = total === 0 ? '(none)' : `(${state[key] + 1}-${last} of ${total})`;
}
$('nodes-prev').addEventListener('click', () => { state.nodesOffset = Math.max(0, state.nodesOffset - PAGE); void refresh(); });
$('nodes-next').addEventListener('click', () => { state.nodesOffset += PAGE; void refresh(); });
$('moves-prev').addEventListener('click', () => { state.movesOffset = Math.max(0, state.movesOffset - PAGE); void refresh(); });
$('moves-next').addEventListener('click', () => { state.movesOffset += PAGE; void refresh(); });
$('nodes-filter').addEventListener('input', () => { state.nodesOffset = 0; void refresh(); });
$('nodes-sort').addEventListener('change', () => { state.nodesOffset = 0; void refresh(); });

function renderBanner(status) {
  const lines = [];
  const r = status.rebalancer;
  if (r.state === 'paused') lines.push(`Rebalancing is paused by ${r.pausedBy ?? 'someone'}: ${r.reason ?? 'no reason given'}${r.since ? ` (since ${r.since})` : ''}`);
  if (status.recoveryPending.length > 0) {
    const shown = status.recoveryPending.slice(0, 5).map((p) => `${p.partition} (${p.failedOwner} failed in epoch ${p.epoch})`).join(', ');
    const more = status.recoveryPending.length > 5 ? ` and ${status.recoveryPending.length - 5} more` : '';
    lines.push(`Rebalancing is held back: recovery pending on ${shown}${more}`);
  }
  const under = status.underReplicated ?? [];
  if (under.length > 0) {
    const word = (u) => (u.repair ? `repairing ${u.repair.lost} → ${u.repair.to}` : u.lost.length > 0 ? `lost: ${u.lost.map((l) => l.reason).join('; ')}` : 'waiting for its copies to return or the repair timeout');
    const shown = under.slice(0, 5).map((u) => `${u.partition} (${u.liveCopies}/${u.replicationFactor} live, ${word(u)})`).join(', ');
    const more = under.length > 5 ? ` and ${under.length - 5} more` : '';
    lines.push(`${under.length} partition(s) under-replicated, ${status.repairsRunning} repair(s) running: ${shown}${more}`);
  }
  const banner = $('banner');
  banner.hidden = lines.length === 0;
  banner.replaceChildren(...lines.map((l) => el('div', { textContent: l })));
  $('summary').textContent =
    `rebalancer ${r.state}${r.asOf ? ` (as of ${new Date(r.asOf).toLocaleTimeString()}: the loop is busy)` : ''} · ${status.nodes.live}/${status.nodes.total} nodes live, ${status.nodes.draining} draining · ` +
    `${status.partitions} partitions · ${status.movesRunning} moves running`;
  $('temporal-ui').href = status.temporalUiUrl;
}

// Propose mode: the plan waiting for approval, with its approve and refresh buttons; hidden in auto mode.
function renderPlan(r) {
  const section = $('plan');
  section.hidden = r.mode !== 'propose';
  const plan = r.pendingPlan;
  section.dataset.plan = plan?.id ?? '';
  $('approve-form').hidden = !plan;
  if (!plan) {
    $('plan-summary').textContent = r.approved ? `(approved plan ${r.approved.planId}: ${r.approved.stepsLeft} step(s) yet to start)` : `(none: ${r.waitingFor ?? 'the loop has not planned yet'})`;
    $('plan-steps').replaceChildren();
    return;
  }
  $('plan-summary').textContent =
    `${plan.id} · made on generation ${plan.generation} at ${new Date(plan.madeAt).toLocaleTimeString()} · ` +
    `${plan.steps.length} step(s), ${bytes(plan.bytes)}, predicted ${(plan.predictedMs / 1000).toFixed(1)} s` +
    (plan.beyond ? ` · the first of ${plan.steps.length + plan.beyond} to convergence (the other ${plan.beyond} are proposed once these are done)` : '');
  $('plan-steps').replaceChildren(
    ...plan.steps.map((s, i) =>
      el(
        'div',
        { className: 'step row', dataset: { partition: s.partition, op: s.op } },
        el('span', { className: 'muted', textContent: String(i + 1) }),
        el('span', { textContent: s.op }),
        el('strong', { textContent: s.partition }),
        el('span', { textContent: `${s.from} → ${s.to}` }),
        el('span', { textContent: bytes(s.bytes) }),
        el('span', { className: 'muted', textContent: s.reason }),
      ),
    ),
  );
}

function scoreBar(n, view) {
  const scale = view.maxTotal > 0 ? 100 / (view.maxTotal * 1.1) : 0;
  const bar = el('div', { className: 'bar', title: DIMENSIONS.map((d) => `${d} ${n[d].toFixed(2)}`).join(', ') + ` · total ${n.total.toFixed(2)}` });
  let left = 0;
  for (const d of DIMENSIONS) {
    // The scores are weighted already: the segments add up to the total, where the marks are drawn.
    const width = n[d] * scale;
    if (width <= 0) continue;
    bar.append(el('div', { className: `seg ${d}`, style: { left: `${left}%`, width: `${width}%` } }));
    left += width;
  }
  const mark = (cls, at, label) => el('div', { className: `mark ${cls}`, title: `${label} ${at.toFixed(2)}`, style: { left: `${Math.max(0, at * scale)}%` } });
  bar.append(mark('threshold', view.lower, 'mean - threshold'), mark('mean', view.mean, 'mean'), mark('threshold', view.upper, 'mean + threshold'));
  return bar;
}

// A node's replicas, owned partitions, disk and traffic against its share: red where outside its band.
function bandsOf(n) {
  if (!n.bands) return el('span', { className: 'bands muted', textContent: 'no share (down or draining)' });
  return el('span', { className: 'bands' },
    ...BANDS.map((d) => {
      const b = n.bands[d];
      const dev = b.share > 0 ? Math.round(((b.load - b.share) / b.share) * 100) : 0;
      const side = b.inside ? 'inside' : b.load > b.high ? 'above' : 'below';
      return el('span', {
        className: b.inside ? 'band' : 'band out',
        dataset: { dimension: d, inside: String(b.inside) },
        title: `${d}: ${b.load.toFixed(1)}, ${side} its band ${b.low.toFixed(1)} to ${b.high.toFixed(1)} (share ${b.share.toFixed(1)})`,
        textContent: `${d} ${dev >= 0 ? '+' : ''}${dev}%`,
      });
    }));
}

// Pins and exclusions, each with who, why and since when, and a button (with its own reason) that lifts it.
function renderHolds(rebalancer) {
  const row = (kind, h, undo, body) => {
    const form = el('form', { className: `hold row ${kind}`, dataset: { id: h.id } },
      el('strong', { textContent: h.id }),
      el('span', { textContent: `${kind} by ${h.by} since ${h.since}: ${h.reason}` }),
      el('input', { name: 'reason', placeholder: 'reason (required)', required: true }),
      el('button', { type: 'submit', className: undo, textContent: undo }));
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      await act(`/api/${undo}`, { ...body, reason: new FormData(form).get('reason') });
    });
    return form;
  };
  const pinned = rebalancer.pinned ?? [];
  const excluded = rebalancer.excluded ?? [];
  // Drawn again only when they change, so a reason being typed into a row survives the polls.
  const key = JSON.stringify([pinned, excluded]);
  if (key === state.holds) return;
  state.holds = key;
  $('holds-count').textContent = pinned.length + excluded.length === 0 ? '(none)' : `(${pinned.length} pinned, ${excluded.length} excluded)`;
  $('holds').replaceChildren(
    ...pinned.map((h) => row('pinned', h, 'unpin', { partition: h.id })),
    ...excluded.map((h) => row('excluded', h, 'include', { node: h.id })),
  );
}

function renderNodes(view, excluded) {
  pager('nodes', 'nodesOffset', view.total);
  $('nodes').replaceChildren(
    ...view.nodes.map((n) => {
      const out = excluded.has(n.node);
      const classes = ['node', 'row', ...(n.live ? [] : ['down']), ...(n.draining ? ['draining'] : []), ...(out ? ['excluded'] : []), ...(state.detail === n.node ? ['selected'] : [])];
      return el(
        'div',
        { className: classes.join(' '), dataset: { node: n.node }, title: 'show its partitions, moves and score over time', onclick: () => openDetail(n.node) },
        el('strong', { textContent: n.node }),
        el('span', { textContent: `zone ${n.zone}` }),
        el('span', { textContent: `cap ${n.capacity}` }),
        el('span', {},
          n.live ? null : el('span', { className: 'badge down', textContent: 'down' }),
          n.draining ? el('span', { className: 'badge draining', textContent: 'draining' }) : null,
          out ? el('span', { className: 'badge excluded', textContent: 'excluded', title: 'excluded from rebalancing' }) : null),
        scoreBar(n, view),
        el('span', { textContent: n.total.toFixed(2) }),
        bandsOf(n),
      );
    }),
  );
}

// A running move's bytes copied of the bytes it copies in all, as the admin service has seen them.
function progressBar(m) {
  const pct = m.bytesTotal ? Math.round((100 * m.bytesCopied) / m.bytesTotal) : m.bytesRemaining === 0 ? 100 : 0;
  return el('span', { title: `${bytes(m.bytesCopied)} of ${bytes(m.bytesTotal)} copied` },
    el('div', { className: 'progress' }, el('div', { style: { width: `${pct}%` } })),
    el('span', { className: 'muted', textContent: `${bytes(m.bytesRemaining)} left` }));
}

// A move whose status query did not answer in time (a busy worker): its phase as Temporal's visibility lists it.
const LATE = 'its status did not answer in time (the worker is busy): phase as Temporal lists it';

// A move whose query did not answer this time shows its last answer, with when it came.
const asOf = (m) => (m.asOf ? `as of ${new Date(m.asOf).toLocaleTimeString()} (the worker is busy): ` : '');

function renderMoves(view) {
  pager('moves', 'movesOffset', view.total);
  const rows = [...view.running, ...(view.late ?? []).map((m) => ({ ...m, late: true }))];
  rows.sort((a, b) => a.partition.localeCompare(b.partition, 'en', { numeric: true }));
  $('moves').replaceChildren(
    ...rows.map((m) => {
      return el(
        'div',
        { className: m.late ? 'move row late' : 'move row', dataset: { partition: m.partition, phase: m.phase } },
        el('strong', { textContent: m.partition }),
        el('span', { textContent: m.kind }),
        el('span', { textContent: `${m.from ?? '+'} → ${m.to}` }),
        el('span', { className: 'phase', textContent: m.phase }),
        m.late ? el('span', { className: 'muted', textContent: '' }) : progressBar(m),
        el('span', { className: 'blocking', textContent: m.late ? LATE : asOf(m) + (m.blockingReason ?? '') }),
        el('a', { href: m.link, target: '_blank', rel: 'noopener', textContent: 'Temporal UI' }),
      );
    }),
  );
  $('recent').replaceChildren(
    ...view.recent.map((m) => {
      const o = m.outcome;
      const how = !o ? m.executionStatus.toLowerCase() : o.status === 'completed' ? `completed (B ${o.boundary ?? '-'})` : o.status === 'aborted' ? `aborted (${o.code}): ${o.reason}` : `cancelled: ${o.reason}`;
      return el(
        'div',
        { className: 'ended row', dataset: { partition: m.partition, outcome: o?.status ?? m.executionStatus.toLowerCase() } },
        el('strong', { textContent: m.partition }),
        el('span', { textContent: m.from && m.to ? `${m.from} → ${m.to}` : '-' }),
        el('span', { className: 'muted', textContent: m.closedAt ?? '' }),
        el('span', { className: 'outcome', textContent: how }),
        el('a', { href: m.link, target: '_blank', rel: 'noopener', textContent: 'Temporal UI' }),
      );
    }),
  );
}

// One uPlot chart per figure, made on first data and fed new data after; `series` are the y series (x is time, in
// seconds as uPlot takes it). Each figure says how many points and each series' largest value, for tests and
// anyone reading the page's source.
// `counts`: whole numbers, the axis to 1 at the least.
function plot(name, series, data, format, counts = false) {
  const figure = document.querySelector(`.chart[data-chart="${name}"]`);
  figure.dataset.points = String(data[0].length);
  figure.dataset.max = JSON.stringify(Object.fromEntries(series.map((s, i) => [s.label, Math.max(0, ...data[i + 1].filter((v) => v !== null))])));
  const existing = state.charts[name];
  if (existing && existing.series.length === series.length + 1) {
    existing.setData(data);
    return;
  }
  existing?.destroy();
  const width = Math.max(320, figure.clientWidth - 10);
  state.charts[name] = new uPlot(
    {
      width,
      height: 170,
      series: [{}, ...series.map((s) => ({ width: 1.5, value: (_u, v) => (v === null ? '-' : format(v)), ...s }))],
      axes: [{}, { size: 90, values: (_u, ticks) => ticks.map(format), ...(counts ? { incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] } : {}) }],
      // From zero up: a flat line of zeros sits at the bottom, not mid-chart.
      scales: { y: { range: (_u, min, max) => [Math.min(0, min), Math.max(counts ? 1 : 1e-9, max * 1.1)] } },
      hooks: { draw: [drawMarkers] },
    },
    data,
    figure.querySelector('div'),
  );
}

// Each pause (orange) and resume (green) as a vertical line across the plot.
function drawMarkers(u) {
  const { ctx, bbox } = u;
  ctx.save();
  ctx.lineWidth = 2;
  for (const m of state.markers) {
    const x = u.valToPos(Date.parse(m.at) / 1000, 'x', true);
    if (x < bbox.left || x > bbox.left + bbox.width) continue;
    ctx.strokeStyle = m.action === 'pause' ? '#e07020' : '#2a9d4a';
    ctx.beginPath();
    ctx.moveTo(x, bbox.top);
    ctx.lineTo(x, bbox.top + bbox.height);
    ctx.stroke();
  }
  ctx.restore();
}

// Where sampling stopped for a while (the service was down) a gap point breaks each line instead of joining
// across it; `column` reads one series, null at the gaps.
function withGaps(points, intervalMs) {
  const out = [];
  for (const p of points) {
    const last = out[out.length - 1];
    if (last && p.at - last.at > 3 * intervalMs) out.push({ gap: true, at: (last.at + p.at) / 2 });
    out.push(p);
  }
  return out;
}
const column = (points, f) => points.map((p) => (p.gap ? null : f(p)));

const perSecond = (v) => `${bytes(v)}/s`;
const count = (v) => String(Math.round(v));
const score = (v) => v.toFixed(3);

function renderHistory(h) {
  state.markers = h.markers;
  state.intervalMs = h.intervalMs;
  const s = withGaps(h.samples, h.intervalMs);
  const x = s.map((p) => p.at / 1000);
  $('history-note').textContent =
    `(${h.samples.length} samples, one every ${h.intervalMs / 1000} s${h.lastError ? `; the last sample failed: ${h.lastError}` : ''})`;
  const worst = (d) => column(s, (p) => (p.worst[d] ? Math.abs(p.worst[d].deviation) : null));
  const worstNode = (d) => (_u, v, _si, i) => (v === null ? '-' : `${v.toFixed(3)} (${s[i]?.worst?.[d]?.node ?? '-'})`);
  plot(
    'spread',
    [
      { label: 'spread', stroke: '#111', width: 2 },
      { label: 'band', stroke: '#c33', dash: [6, 4] },
      ...DIMENSIONS.map((d) => ({ label: `${d} worst`, stroke: COLORS[d], value: worstNode(d) })),
    ],
    [x, column(s, (p) => p.spread), column(s, (p) => p.threshold), ...DIMENSIONS.map(worst)],
    score,
  );
  plot('bytes', [{ label: 'bytes/s', stroke: '#3ba55c', fill: 'rgba(59,165,92,0.15)' }], [x, column(s, (p) => p.bytesPerSec)], perSecond);
  // Ended moves as running counts per outcome over the hour, stepped at each sample.
  const outcomeOf = (m) => (m.outcome in OUTCOMES ? m.outcome : 'other');
  const ended = Object.keys(OUTCOMES).map((o) => column(s, (p) => h.ended.filter((m) => m.closedAt <= p.at && outcomeOf(m) === o).length));
  const stepped = uPlot.paths.stepped({ align: 1 });
  plot(
    'moves',
    [{ label: 'running', stroke: '#3b6fd8', width: 2, paths: stepped }, ...Object.entries(OUTCOMES).map(([o, color]) => ({ label: o, stroke: color, paths: stepped }))],
    [x, column(s, (p) => p.running), ...ended],
    count,
    true,
  );
  plot('recovery', [{ label: 'recoveries pending', stroke: '#c33', paths: stepped }], [x, column(s, (p) => p.recoveryPending)], count, true);
  $('markers').replaceChildren(
    ...h.markers.map((m) =>
      el('div', { className: 'marker row', dataset: { action: m.action } },
        el('span', { className: 'muted', textContent: new Date(m.at).toLocaleTimeString() }),
        el('span', { textContent: `${m.action === 'pause' ? 'paused' : 'resumed'} by ${m.actor} (${m.source}): ${m.reason}` }))),
  );
}

function openDetail(node) {
  state.detail = node;
  $('node-detail').hidden = false;
  void refreshDetail();
  $('node-detail').scrollIntoView({ behavior: 'smooth', block: 'nearest' });
}
$('detail-close').addEventListener('click', () => {
  state.detail = null;
  $('node-detail').hidden = true;
});

// A node that cannot be read (removed, the broker down) says why in the panel and keeps what it showed.
async function refreshDetail() {
  const node = state.detail;
  if (!node) return;
  $('detail-node').textContent = node;
  let d;
  try {
    d = await getJson(`/api/nodes/${encodeURIComponent(node)}`);
  } catch (err) {
    $('detail-summary').textContent = `could not read it: ${err.message}`;
    return;
  }
  if (state.detail !== node) return;
  const sc = d.score;
  $('detail-summary').textContent =
    `zone ${sc.zone} · cap ${sc.capacity}${sc.live ? '' : ' · down'}${sc.draining ? ' · draining' : ''} · score ${sc.total.toFixed(3)} ` +
    `(mean ${d.mean.toFixed(3)}, band ${d.lower.toFixed(3)} to ${d.upper.toFixed(3)})`;
  const p = withGaps(d.points, state.intervalMs);
  plot(
    'node',
    [
      { label: 'score', stroke: '#3b6fd8', width: 2 },
      { label: 'mean', stroke: '#111' },
      { label: 'mean + threshold', stroke: '#c33', dash: [6, 4] },
      { label: 'mean - threshold', stroke: '#c33', dash: [6, 4] },
    ],
    [p.map((q) => q.at / 1000), column(p, (q) => q.total), column(p, (q) => q.mean), column(p, (q) => q.mean + q.threshold), column(p, (q) => q.mean - q.threshold)],
    score,
  );
  const direction = (m) => (m.to === node ? 'in' : 'out');
  $('detail-moves').replaceChildren(
    ...d.running.map((m) =>
      el('div', { className: 'detail-move row running', dataset: { partition: m.partition, direction: direction(m) } },
        el('span', { textContent: direction(m) }),
        el('strong', { textContent: m.partition }),
        el('span', { textContent: m.kind }),
        el('span', { textContent: `${m.from ?? '+'} → ${m.to}` }),
        progressBar(m),
        el('span', { className: 'phase', textContent: m.phase }))),
    ...d.ended.slice().reverse().map((m) =>
      el('div', { className: 'detail-move row ended', dataset: { partition: m.partition, direction: direction(m), outcome: m.outcome } },
        el('span', { textContent: direction(m) }),
        el('strong', { textContent: m.partition }),
        el('span', { textContent: m.kind ?? '-' }),
        el('span', { textContent: `${m.from ?? '+'} → ${m.to ?? '-'}` }),
        el('span', { className: 'muted', textContent: new Date(m.closedAt).toLocaleTimeString() }),
        el('span', { className: 'outcome', textContent: m.outcome }))),
  );
  if (d.running.length + d.ended.length === 0) $('detail-moves').append(el('div', { className: 'muted', textContent: 'none in the last hour' }));
  $('detail-partitions-count').textContent = `(${d.partitions.length}: ${d.partitions.filter((x) => x.role === 'owner').length} owned)`;
  $('detail-partitions').replaceChildren(
    ...d.partitions.map((x) => el('span', { className: x.role, dataset: { partition: x.partition }, title: `${x.kind}, ${x.role}`, textContent: `${x.partition} ${x.role}` })),
  );
}

async function refreshHistory() {
  if (Date.now() - state.historyAt < HISTORY_POLL_MS) return;
  state.historyAt = Date.now();
  renderHistory(await getJson('/api/history'));
  await refreshDetail();
}

async function refresh() {
  const filter = $('nodes-filter').value;
  const nodesQuery = new URLSearchParams({ offset: state.nodesOffset, limit: PAGE, sort: $('nodes-sort').value, ...(filter ? { filter } : {}) });
  // The history is asked for beside the rest, not after it: one round trip less before the page is drawn.
  const history = refreshHistory().then(
    () => null,
    (err) => err,
  );
  try {
    const [status, nodes, moves] = await Promise.all([
      getJson('/api/status'),
      getJson(`/api/nodes?${nodesQuery}`),
      getJson(`/api/moves?offset=${state.movesOffset}&limit=${PAGE}&recent=10`),
    ]);
    renderBanner(status);
    renderHolds(status.rebalancer);
    renderPlan(status.rebalancer);
    renderNodes(nodes, new Set((status.rebalancer.excluded ?? []).map((h) => h.id)));
    renderMoves(moves);
    const failed = await history;
    if (failed) throw failed;
    $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    $('updated').textContent = `update failed: ${err.message}`;
  }
}

async function poll() {
  await refresh();
  setTimeout(poll, POLL_MS);
}
void poll();
