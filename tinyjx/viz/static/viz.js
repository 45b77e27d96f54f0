// tinyjx VIZ: renders the embedded program data (see tinyjx/viz/recording.py for its fields) into the page.
// Everything is drawn from strings into innerHTML: SVG included, so the page needs no namespace URL or library.
'use strict';

const DATA = JSON.parse(document.getElementById('viz-data').textContent);
const state = {fn: 0, pass: -1};   // pass -1 is the jaxpr as traced
const PALETTE = ['#ffd6a5', '#caffbf', '#9bf6ff', '#bdb2ff', '#ffc6ff', '#fdffb6', '#a0c4ff', '#ffadad',
                 '#d0f4de', '#e4c1f9'];
const NODE_W = 132, NODE_H = 34, COL_W = 150, ROW_H = 62;

const esc = s => String(s).replace(/[&<>"]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]));
const byId = id => document.getElementById(id);
const program = () => DATA.programs[state.fn];
const kernelColor = k => PALETTE[k % PALETTE.length];
const fmtUs = us => us >= 1000 ? (us / 1000).toFixed(2) + ' ms' : us.toFixed(1) + ' us';

// --- layered layout: a node's row is its longest path from an input; rows are ordered by the mean position of
// each node's neighbours (predecessors sweeping down, successors sweeping up), a few sweeps.
function layout(graph) {
  const preds = new Map(), succs = new Map(), row = new Map();
  for (const id of graph.nodes) { preds.set(id, []); succs.set(id, []); }
  for (const [a, b] of graph.edges) {
    if (preds.has(b) && succs.has(a)) { preds.get(b).push(a); succs.get(a).push(b); }
  }
  for (const id of graph.nodes) {   // nodes come in topological order
    let r = 0;
    for (const p of preds.get(id)) r = Math.max(r, row.get(p) + 1);
    row.set(id, r);
  }
  const rows = [];
  for (const id of graph.nodes) (rows[row.get(id)] = rows[row.get(id)] || []).push(id);
  const pos = new Map();
  const place = r => r.forEach((id, i) => pos.set(id, i));
  rows.forEach(place);
  const centre = (id, nbrs) => {
    const n = nbrs.get(id);
    return n.length ? n.reduce((s, p) => s + pos.get(p), 0) / n.length : pos.get(id);
  };
  for (let sweep = 0; sweep < 4; sweep++) {
    const down = sweep % 2 === 0;
    for (const r of (down ? rows : rows.slice().reverse())) {
      const key = new Map(r.map(id => [id, centre(id, down ? preds : succs)]));
      r.sort((a, b) => key.get(a) - key.get(b));
      place(r);
    }
  }
  const width = Math.max(1, ...rows.map(r => r.length)) * COL_W + 20;
  const xy = new Map();
  rows.forEach((r, y) => {
    const left = (width - r.length * COL_W) / 2;
    r.forEach((id, i) => xy.set(id, [left + i * COL_W + COL_W / 2, 14 + y * ROW_H + NODE_H / 2]));
  });
  return {xy, width, height: rows.length * ROW_H + 24};
}

function graphSvg(prog, graph, marks) {
  const {xy, width, height} = layout(graph);
  const outs = new Set(graph.outs), added = new Set(marks.added || []), kernelOf = marks.kernelOf || {};
  const parts = [`<svg id="graph-svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`];
  for (const [a, b] of graph.edges) {
    if (!xy.has(a) || !xy.has(b)) continue;
    const [x1, y1] = xy.get(a), [x2, y2] = xy.get(b);
    const ya = y1 + NODE_H / 2, yb = y2 - NODE_H / 2, ym = (ya + yb) / 2;
    parts.push(`<path class="edge" d="M${x1},${ya} C${x1},${ym} ${x2},${ym} ${x2},${yb}"/>`);
  }
  for (const id of graph.nodes) {
    const n = prog.nodes[id], [x, y] = xy.get(id);
    const cls = ['node', 'kind-' + n.kind];
    if (outs.has(id)) cls.push('out');
    if (added.has(id)) cls.push('added');
    const k = kernelOf[id];
    const fill = k === undefined ? '' : ` style="fill:${kernelColor(k)}"`;
    const kname = k === undefined ? '' : ` (kernel ${prog.kernels[k] ? prog.kernels[k].name : k})`;
    const at = `translate(${x - NODE_W / 2},${y - NODE_H / 2})`;
    parts.push(`<g class="${cls.join(' ')}" data-id="${id}" transform="${at}">` +
      `<title>%${id}:${esc(n.aval)} = ${esc(n.text)}${esc(kname)}</title>` +
      `<rect width="${NODE_W}" height="${NODE_H}" rx="6"${fill}/>` +
      `<text class="op" x="6" y="14">${esc(n.op.slice(0, 17))}</text>` +
      `<text class="aval" x="6" y="27">%${id} ${esc(n.aval.slice(0, 15))}</text></g>`);
  }
  parts.push('</svg>');
  return parts.join('');
}

// --- the pass selector and what a pass changed ---
function renderPassList() {
  const prog = program();
  const entries = [`<button class="pass-entry" data-pass="-1">jaxpr` +
    `<span class="delta">${prog.n_eqns} eqns</span></button>`];
  prog.passes.forEach((p, i) => {
    entries.push(`<button class="pass-entry" data-pass="${i}">${esc(p.name)}` +
      `<span class="delta">+${p.added.length} &minus;${p.removed.length}</span></button>`);
  });
  byId('pass-list').innerHTML = entries.join('');
  for (const b of document.querySelectorAll('.pass-entry')) {
    b.addEventListener('click', () => { state.pass = Number(b.dataset.pass); renderGraph(); });
  }
}

function rulesTable(rw) {
  const rows = rw.rules.map(r => `<tr class="rule-row"><td>${esc(r.rule)}</td><td>${r.fires}</td>` +
    `<td class="plus">+${r.added}</td><td class="minus">&minus;${r.removed}</td></tr>`);
  if (!rows.length) rows.push('<tr><td colspan="4">no rule fired</td></tr>');
  return `<h3>graph_rewrite ${esc(rw.name)}: ${rw.before} &rarr; ${rw.after} nodes</h3>` +
    '<table class="rules"><tr><th>rule</th><th>fires</th><th>added</th><th>removed</th></tr>' +
    rows.join('') + '</table>';
}

function passInfo(prog, p) {
  if (!p) {
    return `<h3>the jaxpr</h3><p>${prog.n_eqns} equations, ${prog.jaxpr.nodes.length} nodes ` +
      '(inputs blue, constants grey, outputs outlined; nodes that reach a kernel in its colour). Pick a pass ' +
      'above to see the graph after it: the nodes it added are outlined green, and its rewrite rules listed here.</p>';
  }
  const parts = [`<h3>${esc(p.name)} <small>${p.ms.toFixed(1)} ms</small></h3><p>${esc(p.summary)}</p>`,
    `<p class="legend"><span><i class="swatch" style="border:3px solid #1a9c3c"></i>added ${p.added.length}</span>` +
    `<span>removed ${p.removed.length}</span></p>`];
  p.rewrites.forEach(rw => parts.push(rulesTable(rw)));
  if (p.removed.length) {
    const gone = p.removed.slice(0, 60).map(id => `%${id} ${esc(prog.nodes[id].op)}:${esc(prog.nodes[id].aval)}`);
    parts.push(`<h3>removed nodes</h3><pre>${gone.join('\n')}${p.removed.length > 60 ? '\n...' : ''}</pre>`);
  }
  if (p.detail) parts.push(`<pre>${esc(p.detail)}</pre>`);
  return parts.join('');
}

function renderGraph() {
  const prog = program(), p = state.pass >= 0 ? prog.passes[state.pass] : null;
  const graph = p ? p.graph : prog.jaxpr;
  const last = prog.passes[prog.passes.length - 1];   // the jaxpr's nodes that survive are coloured by kernel too
  const marks = p ? {added: p.added, kernelOf: p.kernel_of} : {kernelOf: last ? last.kernel_of : {}};
  byId('graph-view').innerHTML = graphSvg(prog, graph, marks);
  byId('pass-info').innerHTML = passInfo(prog, p);
  for (const b of document.querySelectorAll('.pass-entry')) {
    b.classList.toggle('selected', Number(b.dataset.pass) === state.pass);
  }
}

// --- kernels ---
function kernelTime(prog, k) {
  const t = prog.timeline.find(e => e.kernel === k);
  return t ? fmtUs(t.dur_us) : 'not timed';
}

function renderKernels() {
  const prog = program();
  byId('kernel-list').innerHTML = prog.kernels.map((k, i) =>
    `<details class="kernel" data-kernel="${i}"><summary><i class="swatch" style="background:${kernelColor(i)}"></i>` +
    `${esc(k.name)}<span class="stats">${k.eqns.length} eqns, ${k.flops} flops, ${k.bytes} bytes, ` +
    `${kernelTime(prog, i)}</span></summary>` +
    `<ul class="fused">${k.eqns.map(e => `<li>${esc(e)}</li>`).join('')}</ul>` +
    `<pre class="kernel-src">${esc(k.source)}</pre></details>`).join('') || '<p>no kernels</p>';
  for (const d of document.querySelectorAll('.kernel')) {
    const ids = new Set(prog.kernels[Number(d.dataset.kernel)].nodes.map(String));
    d.addEventListener('mouseenter', () => highlight(ids));
    d.addEventListener('mouseleave', () => highlight(new Set()));
  }
}

function highlight(ids) {
  for (const g of document.querySelectorAll('#graph-svg .node')) g.classList.toggle('hl', ids.has(g.dataset.id));
}

// --- timeline: one row per step, bars at their start and duration in the run ---
function renderTimeline() {
  const prog = program(), tl = prog.timeline;
  if (!tl.length) { byId('timeline').innerHTML = '<p>not run yet</p>'; return; }
  const end = Math.max(...tl.map(e => e.start_us + e.dur_us)) || 1;
  const left = 190, span = 980, bar = 16, width = left + span + 60, height = tl.length * (bar + 4) + 30;
  const x = us => left + us / end * span;
  const parts = [`<svg id="timeline-svg" width="${width}" height="${height}">`];
  for (let i = 0; i <= 5; i++) {
    const us = end * i / 5, tx = x(us);
    parts.push(`<line class="tl-axis" x1="${tx}" y1="${height - 22}" x2="${tx}" y2="${height - 16}"/>` +
      `<text class="tl-tick" x="${tx - 12}" y="${height - 4}">${fmtUs(us)}</text>`);
  }
  parts.push(`<line class="tl-axis" x1="${left}" y1="${height - 22}" x2="${left + span}" y2="${height - 22}"/>`);
  tl.forEach((e, i) => {
    const y = i * (bar + 4) + 4, w = Math.max(2, e.dur_us / end * span);
    const fill = e.kernel >= 0 ? kernelColor(e.kernel) : '#d0d0d0';
    parts.push(`<text class="tl-label" x="4" y="${y + 12}">${esc(e.name.slice(0, 30))}</text>` +
      `<rect class="tl-bar tl-${e.kind}" data-kernel="${e.kernel}" x="${x(e.start_us)}" y="${y}" width="${w}" ` +
      `height="${bar}" fill="${fill}">` +
      `<title>${esc(e.name)}: ${fmtUs(e.dur_us)} at ${fmtUs(e.start_us)}</title></rect>` +
      `<text class="tl-label" x="${x(e.start_us) + w + 4}" y="${y + 12}">${fmtUs(e.dur_us)}</text>`);
  });
  parts.push('</svg>');
  byId('timeline').innerHTML = parts.join('');
}

// --- the function selector ---
function renderAll() {
  const prog = program();
  const total = prog.timeline.reduce((s, e) => s + e.dur_us, 0);
  byId('fn-summary').textContent = `${prog.name} on ${prog.device}: ${prog.n_eqns} equations, ` +
    `${prog.passes.length} passes, ${prog.kernels.length} kernels, ${fmtUs(total)} in one run`;
  renderPassList();
  renderGraph();
  renderTimeline();
  renderKernels();
}

function main() {
  const select = byId('fn-select');
  if (!DATA.programs.length) { byId('fn-summary').textContent = 'no jitted function recorded yet'; return; }
  select.innerHTML = DATA.programs.map((p, i) => `<option value="${i}">${esc(p.name)}</option>`).join('');
  state.fn = DATA.programs.length - 1;
  select.value = String(state.fn);
  const want = /pass=([^&]+)/.exec(location.hash);   // page.html#pass=decompose opens at that pass
  if (want) state.pass = program().passes.findIndex(p => p.name === decodeURIComponent(want[1]));
  select.addEventListener('change', () => { state.fn = Number(select.value); state.pass = -1; renderAll(); });
  renderAll();
}

main();
