// PyPerf flame graph page: reads the profile embedded as JSON, builds the
// call tree and draws it as positioned elements (root at the top), with
// search, click-to-zoom and tooltips. Text only ever reaches the page through
// textContent, never as HTML.
//
// The embedded data (FlameGraphEncoder.cc writes it):
//   names:  [[kind, label, title?], ...]  kind indexes KINDS below; label is
//           the box's text, title (if not the label) the frame's full text
//   nodes:  [parent, name, self, ...] triples; node 0 is the root "all" and a
//           parent always comes before its children
//   start, end (ISO 8601 UTC), periodNs, totalSamples
//
// A node's label (what its box shows): "all" for the root, "<comm>-<pid>" for
// a process, "<tid>" for a thread, a Python frame's display name
// ("demo_workload.RequestHandler.handle"), any other frame's text. Its key
// names it among its siblings, in the tooltip, in paths and in searches: the
// title (or label) with the kind's suffix, for a Python frame
// "app.demo_workload.RequestHandler.handle (/app/demo_workload.py:15)_[p]".
//
// window.pyperfFlameGraph (for tests and the curious):
//   totalSamples, nodeCount, label(id), key(id), kind(id), samples(id) (with
//   descendants), self(id), parent(id), children(id), path(id) (keys below
//   the root), findPath(keys) -> id or -1, search(term) -> {frames,
//   samples}, zoomTo(id or keys), zoomed() -> id, collapsed() -> [[stack,
//   count], ...] (the data turned back into stacks of keys).
(function () {
  'use strict';
  const KINDS = ['root', 'process', 'thread', 'python', 'native', 'kernel', 'marker', 'task'];
  const SUFFIX = {
    python: '_[p]', native: '_[pn]', kernel: '_[k]', marker: '_[pe]', task: '_[pt]',
  };
  const KIND_NAMES = {
    python: 'Python', native: 'native', kernel: 'kernel', marker: 'error marker',
    task: 'asyncio task', process: 'process', thread: 'thread', root: 'all',
  };
  // Each kind's palette: a hue range, saturation and lightness; a frame's
  // hue within the range comes from a hash of its label, so neighbours differ.
  const PALETTES = {
    root: [0, 0, 0, 78], process: [265, 10, 35, 80], thread: [205, 10, 20, 80],
    python: [85, 45, 55, 55], native: [18, 22, 85, 62], kernel: [195, 20, 70, 62],
    marker: [340, 15, 80, 55], task: [280, 25, 55, 60],
  };
  const ROW = 16;

  const data = JSON.parse(document.getElementById('pyperf-profile').textContent);
  const count = data.nodes.length / 3;
  const parent = new Int32Array(count);
  const name = new Int32Array(count);
  const self = new Float64Array(count);
  const total = new Float64Array(count);
  const depth = new Int32Array(count);
  const children = [];
  for (let i = 0; i < count; i++) {
    parent[i] = data.nodes[3 * i];
    name[i] = data.nodes[3 * i + 1];
    self[i] = data.nodes[3 * i + 2];
    total[i] = self[i];
    children.push([]);
    if (i > 0) {
      children[parent[i]].push(i);
      depth[i] = depth[parent[i]] + 1;
    }
  }
  for (let i = count - 1; i > 0; i--) total[parent[i]] += total[i];

  function kind(id) { return KINDS[data.names[name[id]][0]] || 'marker'; }
  function label(id) { return data.names[name[id]][1]; }
  function key(id) {
    const entry = data.names[name[id]];
    return (entry.length > 2 ? entry[2] : entry[1]) + (SUFFIX[kind(id)] || '');
  }
  const keys = [];
  for (let i = 0; i < count; i++) keys.push(key(i));
  for (const list of children) list.sort((a, b) => (keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : 0));
  const all = total[0];

  function hash(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
    return (h >>> 0) / 4294967296;
  }
  function colour(k, key) {
    const [hue, range, sat, light] = PALETTES[k] || PALETTES.marker;
    const h = key === null ? 0.5 : hash(key);
    return 'hsl(' + (hue + range * h).toFixed(1) + ',' + sat + '%,' + light + '%)';
  }
  function percent(part, whole) { return whole > 0 ? (100 * part / whole).toFixed(3) : '0.000'; }

  const graph = document.getElementById('graph');
  const tooltip = document.getElementById('tooltip');
  const searchBox = document.getElementById('search');
  const status = document.getElementById('status');
  let zoom = 0;
  let matches = new Set();

  function render() {
    const width = graph.clientWidth || 1000;
    const fragment = document.createDocumentFragment();
    let maxDepth = 0;
    function draw(id, x, w, extraClass) {
      const el = document.createElement('div');
      el.className = 'frame' + extraClass + (matches.has(id) ? ' match' : '');
      el.dataset.node = String(id);
      el.style.left = x.toFixed(2) + 'px';
      el.style.width = w.toFixed(2) + 'px';
      el.style.top = depth[id] * ROW + 'px';
      el.style.background = colour(kind(id), keys[id]);
      if (w > 24) el.textContent = label(id);
      fragment.appendChild(el);
      if (depth[id] > maxDepth) maxDepth = depth[id];
    }
    for (let a = parent[zoom]; a >= 0; a = parent[a]) draw(a, 0, width, ' ancestor');
    const scale = total[zoom] > 0 ? width / total[zoom] : 0;
    const stack = [[zoom, 0]];
    while (stack.length) {
      const [id, x] = stack.pop();
      const w = id === zoom ? width : total[id] * scale;
      // Narrower than a pixel: not drawn (its samples stay in its parent's width).
      if (w < 1) continue;
      draw(id, x, w, '');
      let cx = x;
      for (const c of children[id]) {
        stack.push([c, cx]);
        cx += total[c] * scale;
      }
    }
    graph.replaceChildren(fragment);
    graph.style.height = (maxDepth + 1) * ROW + 'px';
  }

  let lowerKeys = null;  // made on the first search
  function search(term) {
    // A key holds its label: a Python frame's display name ends its full name.
    if (lowerKeys === null) lowerKeys = keys.map((k) => k.toLowerCase());
    matches = new Set();
    let frames = 0;
    let samples = 0;
    if (term) {
      const needle = term.toLowerCase();
      // Samples are counted once: a match under a matching node adds none.
      const stack = [[0, false]];
      while (stack.length) {
        const [id, under] = stack.pop();
        const hit = id > 0 && lowerKeys[id].includes(needle);
        if (hit) {
          matches.add(id);
          frames++;
          if (!under) samples += total[id];
        }
        for (const c of children[id]) stack.push([c, under || hit]);
      }
      status.textContent = frames + ' frames match, ' + samples + ' samples (' +
          percent(samples, all) + '% of all)';
    } else {
      status.textContent = '';
    }
    status.dataset.matches = String(frames);
    status.dataset.samples = String(samples);
    render();
    return { frames, samples };
  }

  function findPath(path) {
    let id = 0;
    for (const wanted of path) {
      const next = children[id].find((c) => keys[c] === wanted);
      if (next === undefined) return -1;
      id = next;
    }
    return id;
  }
  function pathOf(id) {
    const out = [];
    for (; id > 0; id = parent[id]) out.push(keys[id]);
    return out.reverse();
  }
  function zoomTo(target) {
    const id = Array.isArray(target) ? findPath(target) : target;
    if (!(id >= 0 && id < count)) return false;
    zoom = id;
    render();
    return true;
  }
  function collapsed() {
    const out = [];
    for (let i = 0; i < count; i++) {
      if (self[i] === 0 || depth[i] < 2) continue;
      const p = pathOf(i);
      out.push([p[0] + '/' + p.slice(1).join(';'), self[i]]);
    }
    return out;
  }

  function showTooltip(id, event) {
    const lines = [];
    const labelEl = document.createElement('div');
    labelEl.className = 'tt-label';
    labelEl.textContent = keys[id];
    const kindEl = document.createElement('div');
    kindEl.textContent = KIND_NAMES[kind(id)] || kind(id);
    const countEl = document.createElement('div');
    const samplesEl = document.createElement('span');
    samplesEl.className = 'tt-samples';
    samplesEl.textContent = String(total[id]);
    const percentEl = document.createElement('span');
    percentEl.className = 'tt-percent';
    percentEl.textContent = percent(total[id], all);
    countEl.append(samplesEl, ' samples (', percentEl, '% of all samples)');
    lines.push(labelEl, kindEl, countEl);
    if (zoom !== 0) {
      const zoomEl = document.createElement('div');
      const zp = document.createElement('span');
      zp.className = 'tt-zoom-percent';
      zp.textContent = percent(total[id], total[zoom]);
      zoomEl.append(zp, '% of the zoomed frame');
      lines.push(zoomEl);
    }
    tooltip.replaceChildren(...lines);
    tooltip.hidden = false;
    moveTooltip(event);
  }
  function moveTooltip(event) {
    const x = Math.min(event.clientX + 12, window.innerWidth - tooltip.offsetWidth - 4);
    const y = event.clientY + 16 + tooltip.offsetHeight > window.innerHeight
        ? event.clientY - tooltip.offsetHeight - 8 : event.clientY + 16;
    tooltip.style.left = Math.max(0, x) + 'px';
    tooltip.style.top = Math.max(0, y) + 'px';
  }
  function nodeOf(event) {
    const el = event.target.closest('.frame');
    return el ? Number(el.dataset.node) : -1;
  }

  graph.addEventListener('mouseover', (event) => {
    const id = nodeOf(event);
    if (id >= 0) showTooltip(id, event);
  });
  graph.addEventListener('mousemove', (event) => { if (!tooltip.hidden) moveTooltip(event); });
  graph.addEventListener('mouseleave', () => { tooltip.hidden = true; });
  graph.addEventListener('click', (event) => {
    const id = nodeOf(event);
    if (id < 0) return;
    zoomTo(id === zoom ? parent[id] >= 0 ? parent[id] : 0 : id);
    showTooltip(id, event);
  });
  document.getElementById('reset').addEventListener('click', () => zoomTo(0));
  // A large page takes a while to search and redraw: wait until typing pauses.
  let searchTimer = 0;
  searchBox.addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => search(searchBox.value), 150);
  });
  searchBox.addEventListener('keydown', (event) => {
    if (event.key !== 'Enter') return;
    clearTimeout(searchTimer);
    search(searchBox.value);
  });
  window.addEventListener('resize', render);

  function utc(iso) { return iso.replace('T', ' ').replace('Z', ' UTC'); }
  const period = data.periodNs > 0
      ? (data.periodNs / 1e6).toFixed(3) + ' ms (' + (1e9 / data.periodNs).toFixed(1) + ' Hz)'
      : 'unknown';
  document.getElementById('summary').textContent =
      'Interval ' + utc(data.start) + ' to ' + utc(data.end) + ' \u00b7 ' + all +
      ' samples \u00b7 sampling period ' + period;
  document.title = 'PyPerf flame graph ' + utc(data.start);
  const legend = document.getElementById('legend');
  // Every kind a box can have but the root, whether or not this profile has one.
  for (const k of KINDS.filter((k) => k !== 'root')) {
    const key = document.createElement('span');
    key.className = 'key';
    key.dataset.kind = k;
    const swatch = document.createElement('span');
    swatch.className = 'swatch';
    swatch.style.background = colour(k, null);
    key.append(swatch, KIND_NAMES[k] + (SUFFIX[k] ? ' ' + SUFFIX[k] : ''));
    legend.appendChild(key);
  }

  window.pyperfFlameGraph = {
    totalSamples: all, nodeCount: count, label, key: (id) => keys[id], kind,
    samples: (id) => total[id], self: (id) => self[id], parent: (id) => parent[id],
    children: (id) => children[id].slice(), path: pathOf, findPath, search, zoomTo,
    zoomed: () => zoom, collapsed,
  };
  render();
})();
