// netstack ui: the page (docs/ui.md). No framework, no build step, nothing fetched from elsewhere:
// it polls /api/state, draws /api/topology as SVG, and sends changes with the token.
'use strict';
(() => {
  const TOKEN_KEY = 'netstack-ui-token';
  const svg = document.getElementById('graph');
  const SVGNS = svg.namespaceURI; // the inline <svg>'s namespace (so this file names no URL)
  const $ = (sel) => document.querySelector(sel);
  let topo = null;
  let snap = null;
  let token = null;
  let canWrite = false;
  let selected = null; // {type: 'node' | 'link', name, port?}
  let actionsFor = null; // what the actions panel was built for
  let interval = 500;

  // ------------------------------------------------------------------ small helpers
  function h(tag, attrs = {}, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const kid of kids) if (kid !== null && kid !== undefined) e.append(kid);
    return e;
  }
  function s(tag, attrs = {}) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null) continue;
      if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v);
    }
    return e;
  }
  function fmt(v) {
    if (v === null || v === undefined) return '–';
    if (typeof v === 'boolean') return v ? 'yes' : 'no';
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return String(v);
      if (Number.isInteger(v)) return v.toLocaleString('en-US');
      const a = Math.abs(v);
      return a >= 100 ? v.toFixed(0) : a >= 1 ? v.toFixed(1) : String(Number(v.toPrecision(2)));
    }
    return String(v);
  }
  function bytes(v) {
    if (typeof v !== 'number') return fmt(v);
    const units = ['B', 'KB', 'MB', 'GB'];
    let i = 0;
    while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1000; i += 1; }
    return (i ? v.toFixed(1) : String(v)) + ' ' + units[i];
  }
  const perSecond = (v) => (v === null || v === undefined ? '–' : fmt(v) + '/s');
  const mbit = (v) => (v === null || v === undefined ? '–' : fmt(v * 8 / 1e6) + ' Mbit/s');
  function table(rows) {
    return h('table', {}, ...rows.map(([k, v]) => h('tr', {}, h('td', {text: k}), h('td', {text: v}))));
  }
  function say(text, bad = false) {
    const el = $('#action-result');
    el.textContent = text;
    el.classList.toggle('bad', bad);
  }
  function banner(text, bad) {
    const el = $('#banner');
    el.hidden = !text;
    el.textContent = text || '';
    el.classList.toggle('bad', !!bad);
  }
  function pill(status, text) {
    const el = $('#pill');
    el.dataset.status = status;
    el.textContent = text;
  }

  async function api(path, opts = {}) {
    const headers = Object.assign({}, opts.headers || {});
    if (token) headers.Authorization = 'Bearer ' + token;
    const r = await fetch(path, Object.assign({cache: 'no-store'}, opts, {headers}));
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) throw new Error((body && body.error) || 'HTTP ' + r.status);
    return body;
  }

  // ------------------------------------------------------------------ the token
  function takeToken() {
    const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
    if (m) {
      sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
      history.replaceState(null, '', location.pathname + location.search); // out of the address bar
    }
    token = sessionStorage.getItem(TOKEN_KEY);
  }
  async function checkAuth() {
    let write = false;
    if (token) {
      try { write = (await api('/api/auth')).write === true; } catch (e) { write = false; }
      if (!write) {
        say('the token was refused: read-only', true);
        sessionStorage.removeItem(TOKEN_KEY);
        token = null;
      }
    }
    canWrite = write;
    document.body.classList.toggle('can-write', canWrite);
    $('#write-state').textContent = canWrite ? 'can change the testbed' : 'read-only';
    $('#token-form').hidden = canWrite;
    $('#lock').hidden = !canWrite;
    actionsFor = null;
    renderActions();
  }

  // ------------------------------------------------------------------ the graph
  const kindOf = (name) => (topo.nodes.find((n) => n.name === name) || {}).kind;

  async function loadTopology() {
    topo = await api('/api/topology');
    interval = Math.max(100, Math.round((topo.interval_s || 0.5) * 1000));
    $('#title').textContent = `${topo.topology} · testbed ${topo.prefix}`;
    document.title = `netstack ui · ${topo.prefix}`;
    $('#reports-link').hidden = !topo.reports;
    draw();
    actionsFor = null;
  }

  function draw() {
    svg.replaceChildren();
    svg.setAttribute('viewBox', `0 0 ${topo.width} ${topo.height}`);
    const at = Object.fromEntries(topo.nodes.map((n) => [n.name, n]));
    const links = s('g', {class: 'links'});
    const ports = s('g', {class: 'ports'});
    const nodes = s('g', {class: 'nodes'});
    for (const l of topo.links) {
      const a = at[l.a];
      const b = at[l.b];
      if (!a || !b) continue;
      const xy = {x1: a.x, y1: a.y, x2: b.x, y2: b.y};
      const g = s('g', {class: 'link', 'data-link': l.name, 'data-state': 'unknown'});
      g.append(s('line', {class: 'halo', ...xy}), s('line', {class: 'wire', ...xy}), s('line', {class: 'hit', ...xy}),
        s('text', {class: 'mark', x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 9}), s('title', {text: l.name}));
      g.addEventListener('click', (ev) => { ev.stopPropagation(); select({type: 'link', name: l.name}); });
      links.append(g);
      for (const [end, other, port] of [[a, b, l.a_port], [b, a, l.b_port]]) {
        if (end.kind !== 'switch' || !port) continue;
        const d = Math.hypot(other.x - end.x, other.y - end.y) || 1;
        const r = Math.min(32, d / 3);
        const key = `${end.name}/${port}`;
        const c = s('circle', {class: 'port', r: 5, 'data-port': key,
          cx: end.x + (other.x - end.x) * r / d, cy: end.y + (other.y - end.y) * r / d});
        c.append(s('title', {text: key}));
        c.addEventListener('click', (ev) => { ev.stopPropagation(); select({type: 'node', name: end.name, port: key}); });
        ports.append(c);
      }
    }
    for (const n of topo.nodes) {
      const cls = n.kind === 'switch' ? 'kind-switch' : n.kind === 'host' ? 'kind-host' : 'kind-other';
      const g = s('g', {class: `node ${cls}`, 'data-node': n.name, 'data-kind': n.kind,
        transform: `translate(${n.x},${n.y})`});
      g.append(n.kind === 'host' ? s('circle', {r: 18}) : s('rect', {x: -27, y: -16, width: 54, height: 32, rx: 5}));
      g.append(s('text', {text: n.name}), s('text', {class: 'sub', y: 27, text: ''}),
        s('title', {text: `${n.name} (${n.kind})${n.ip ? ' ' + n.ip : ''}`}));
      g.addEventListener('click', (ev) => { ev.stopPropagation(); select({type: 'node', name: n.name}); });
      nodes.append(g);
    }
    svg.append(links, ports, nodes);
    mark();
  }

  function linkTitle(name, st) {
    if (!st) return name;
    const parts = [`${name}: ${st.state}`];
    for (const i of st.impairments || []) {
      parts.push(`${i.direction}: ${i.backend || ''} corrupt ${fmt(i.corrupt || 0)} loss ${fmt(i.loss || 0)}`);
    }
    for (const [m, who] of Object.entries(st.marks || {})) parts.push(`${m} by ${who.join(', ')}`);
    return parts.join('\n');
  }

  function render() {
    const status = snap.testbed;
    pill(status === 'up' ? 'up' : status, status === 'up' ? 'live' : status);
    document.body.classList.toggle('gone', status === 'gone');
    banner(status === 'gone' ? `Testbed ${snap.prefix} is gone: ${snap.message}. The page picks it up again ` +
      'when it is back.' : null, true);
    $('#updated').textContent = snap.time ? 'updated ' + new Date(snap.time * 1000).toLocaleTimeString() : '';
    if (!topo) return;
    for (const g of svg.querySelectorAll('.link')) {
      const st = snap.links[g.dataset.link];
      const prot = !!(st && st.marks && st.marks.protected);
      g.dataset.state = st ? st.state : 'unknown';
      g.classList.toggle('corrupting', !!(st && st.corrupting));
      g.classList.toggle('protected', prot);
      g.querySelector('text.mark').textContent = prot ? 'protected' : '';
      g.querySelector('title').textContent = linkTitle(g.dataset.link, st);
    }
    for (const c of svg.querySelectorAll('circle.port')) {
      const p = snap.ports[c.dataset.port];
      const v = p && (p.views || []).find((x) => x.state);
      c.setAttribute('class', 'port' + (v ? ' tone-' + v.state.tone : ''));
      if (v) {
        c.dataset.state = v.state.value;
        c.dataset.tone = v.state.tone;
      } else {
        delete c.dataset.state;
        delete c.dataset.tone;
      }
      c.querySelector('title').textContent = c.dataset.port + (v ? `: ${v.title} ${v.state.label}` : '') +
        (p && p.carrier === false ? ' (no carrier)' : '');
    }
    for (const g of svg.querySelectorAll('.node')) {
      const n = snap.nodes[g.dataset.node];
      g.dataset.status = n ? n.status : 'unknown';
      g.querySelector('text.sub').textContent = n && n.status === 'unreachable' ? 'unreachable' : '';
    }
    renderPanel();
  }

  // ------------------------------------------------------------------ the side panel
  function select(what) {
    selected = what;
    mark();
    renderPanel();
    renderActions();
  }
  function mark() {
    for (const g of svg.querySelectorAll('.node, .link')) {
      const name = g.dataset.node || g.dataset.link;
      const type = g.dataset.node ? 'node' : 'link';
      g.classList.toggle('selected', !!selected && selected.type === type && selected.name === name);
    }
  }

  function timeline(entries, now, win) {
    const w = 300;
    const t0 = now - win;
    const el = s('svg', {class: 'timeline', viewBox: `0 0 ${w} 10`, preserveAspectRatio: 'none'});
    entries.forEach(([t, , tone, label], i) => {
      const start = Math.max(t, t0);
      const end = i + 1 < entries.length ? entries[i + 1][0] : now;
      if (end <= t0) return;
      const r = s('rect', {class: 'tone-' + tone, x: (start - t0) / win * w, y: 0, height: 10,
        width: Math.max(0.5, (end - start) / win * w)});
      r.append(s('title', {text: `${label} from ${new Date(t * 1000).toLocaleTimeString()}`}));
      el.append(r);
    });
    return el;
  }

  function gauge(g) {
    const show = g.unit === 'B' ? bytes : (v) => fmt(v) + (g.unit ? ' ' + g.unit : '');
    const bar = h('div');
    bar.style.width = (g.max ? Math.min(100, 100 * g.value / g.max) : 0) + '%';
    const text = `${g.label}: ${show(g.value)}${g.max ? ' of ' + show(g.max) : ''}`;
    return h('div', {class: 'gauge-box'}, h('div', {text}),
      h('div', {class: 'gauge', 'data-gauge': g.label}, bar));
  }

  function viewBox(v) {
    const box = h('div', {class: 'view' + (v.error ? ' error' : ''), 'data-view': v.title, 'data-protocol': v.protocol},
      h('h4', {text: v.title}));
    if (v.error) box.append(h('div', {text: v.error}));
    if (v.state) {
      box.append(h('div', {}, h('span', {class: 'badge tone-' + v.state.tone, 'data-state': v.state.value,
        text: v.state.label}), h('span', {class: 'muted', text: ` last ${fmt(snap.window_s || 60)} s:`})));
      box.append(timeline(v.state.timeline || [], snap.time, snap.window_s || 60));
    }
    if (v.gauge) box.append(gauge(v.gauge));
    const rows = (v.rows || []).map(([k, val]) => [k, fmt(val)])
      .concat((v.rates || []).map((r) => [r.label, `${fmt(r.count)} (${perSecond(r.per_s)})`]));
    if (rows.length) box.append(table(rows));
    return box;
  }

  function peerOf(key) {
    const [node, port] = key.split('/');
    for (const l of topo.links) {
      if (l.a === node && l.a_port === port) return [l.b, l.name];
      if (l.b === node && l.b_port === port) return [l.a, l.name];
    }
    return ['?', '?'];
  }

  function portBox(key, p) {
    const [peer, link] = peerOf(key);
    const c = p.counters || {};
    const r = p.rates || {};
    const box = h('div', {'data-port-panel': key},
      h('h3', {text: `${key} → ${peer} (${link})${p.carrier === false ? ': no carrier' : ''}`}));
    box.append(table([
      ['rx frames', `${fmt(c.rx_frames)} (${perSecond(r.rx_frames)})`],
      ['tx frames', `${fmt(c.tx_frames)} (${perSecond(r.tx_frames)})`],
      ['rx / tx', `${mbit(r.rx_bytes)} / ${mbit(r.tx_bytes)}`],
      ['FCS errors · queue drops · kernel drops', `${fmt(c.fcs_errors)} · ${fmt(c.queue_drops)} · ${fmt(c.kernel_drops)}`],
      ['link down · carrier drops', `${fmt(c.link_down)} · ${fmt(c.carrier_drops)}`],
      ['pauses rx / tx', `${fmt(c.pauses_rx)} / ${fmt(c.pauses_tx)}${p.paused ? ' (paused now)' : ''}`],
    ]));
    if (typeof c.buffer_used === 'number') box.append(gauge({label: 'egress buffer', value: c.buffer_used,
      max: c.buffer_bytes, unit: 'B'}));
    for (const v of p.views || []) box.append(viewBox(v));
    return box;
  }

  function nodePanel(name) {
    const info = topo.nodes.find((n) => n.name === name) || {};
    const n = snap.nodes[name] || {status: 'unknown', daemons: {}, views: []};
    const out = [h('h2', {text: `${name} (${info.kind || '?'})${info.ip ? ' ' + info.ip : ''}`}),
      h('div', {'data-node-status': n.status, text: n.status === 'host' ? 'no daemon: its ports are the switches\''
        : `daemons: ${n.status}`})];
    for (const [key, d] of Object.entries(n.daemons || {})) {
      if (!d.ok) out.push(h('div', {class: 'view error', text: `${key} (${d.kind}): ${d.error}`}));
    }
    for (const v of n.views || []) out.push(viewBox(v));
    const keys = Object.keys(snap.ports).filter((k) => k.startsWith(name + '/')).sort();
    if (selected.port) keys.sort((a, b) => (a === selected.port ? -1 : b === selected.port ? 1 : 0));
    for (const k of keys) out.push(portBox(k, snap.ports[k]));
    return out;
  }

  function linkPanel(name) {
    const l = topo.links.find((x) => x.name === name);
    const st = snap.links[name] || {state: 'unknown', impairments: [], marks: {}};
    const out = [h('h2', {text: `link ${name}`}), h('div', {'data-link-state': st.state,
      text: `${st.state}${st.corrupting ? ', corrupting' : ''}${st.marks.protected ? ', protected' : ''}`})];
    if (l) out.push(table([['ends', `${l.a}:${l.a_port || '-'} — ${l.b}:${l.b_port || '-'}`],
      ['rate · delay', `${fmt(l.rate_bps / 1e6)} Mbit/s · ${fmt(l.delay_ns / 1e6)} ms`]]));
    for (const i of st.impairments || []) {
      out.push(h('div', {class: 'view', text: `${i.direction} (${i.backend || '?'}): corrupt ${fmt(i.corrupt || 0)}, ` +
        `loss ${fmt(i.loss || 0)}${i.corrupted !== undefined ? `, corrupted ${fmt(i.corrupted)}` : ''}` +
        `${i.dropped !== undefined ? `, dropped ${fmt(i.dropped)}` : ''}`}));
    }
    for (const [m, who] of Object.entries(st.marks || {})) out.push(h('div', {text: `${m}: ${who.join(', ')}`}));
    if (l) {
      for (const [node, port] of [[l.a, l.a_port], [l.b, l.b_port]]) {
        const key = `${node}/${port}`;
        if (snap.ports[key]) out.push(portBox(key, snap.ports[key]));
      }
    }
    return out;
  }

  function renderPanel() {
    const live = $('#panel-live');
    if (!topo || !snap) {
      live.replaceChildren(h('p', {class: 'muted', text: 'waiting for the testbed…'}));
      return;
    }
    let parts;
    if (selected && selected.type === 'node' && topo.nodes.some((n) => n.name === selected.name)) {
      parts = nodePanel(selected.name);
    } else if (selected && selected.type === 'link' && topo.links.some((l) => l.name === selected.name)) {
      parts = linkPanel(selected.name);
    } else {
      const bad = Object.entries(snap.nodes).filter(([, n]) => n.status === 'unreachable').map(([k]) => k);
      const down = Object.entries(snap.links).filter(([, l]) => l.state === 'down').map(([k]) => k);
      parts = [h('h2', {text: `testbed ${topo.prefix}`}),
        table([['topology', topo.topology], ['nodes · links', `${topo.nodes.length} · ${topo.links.length}`],
          ['unreachable daemons', bad.join(', ') || 'none'], ['links down', down.join(', ') || 'none']]),
        h('p', {class: 'muted', text: 'Click a node or a port for its counters and protocols, a link for its ' +
          'state' + (canWrite ? ' and what you can change.' : '.')})];
    }
    const keep = live.scrollTop;
    live.replaceChildren(...parts);
    live.scrollTop = keep;
  }

  // ------------------------------------------------------------------ changes (with the token)
  async function post(path, body, what) {
    say(what + '…');
    try {
      const r = await api(path, {method: 'POST', headers: {'Content-Type': 'application/json'},
        body: JSON.stringify(body)});
      say(`${what}: done`);
      return r;
    } catch (e) {
      say(`${what}: ${e.message}`, true);
      return null;
    }
  }

  function renderActions() {
    const key = canWrite && selected && selected.type === 'link' && topo ? selected.name : null;
    if (key === actionsFor) return;
    actionsFor = key;
    const box = $('#panel-actions');
    const l = key && topo.links.find((x) => x.name === key);
    if (!l) {
      box.replaceChildren();
      return;
    }
    const num = (id, label) => h('label', {}, label + ' ', h('input', {id, type: 'number', min: '0', max: '1',
      step: 'any', value: '0'}));
    const dir = h('select', {id: 'impair-direction'}, h('option', {value: `${l.a}>${l.b}`, text: `${l.a} → ${l.b}`}),
      h('option', {value: `${l.b}>${l.a}`, text: `${l.b} → ${l.a}`}), h('option', {value: 'both', text: 'both'}));
    const value = (id) => Number($('#' + id).value || 0);
    box.replaceChildren(h('div', {class: 'actions'},
      h('h3', {text: 'change'}),
      h('button', {type: 'button', 'data-action': 'down', text: 'take down',
        onclick: () => post('/api/link', {link: l.name, action: 'down'}, `${l.name} down`)}),
      h('button', {type: 'button', 'data-action': 'up', text: 'bring up',
        onclick: () => post('/api/link', {link: l.name, action: 'up'}, `${l.name} up`)}),
      h('fieldset', {}, h('legend', {text: 'impair'}), dir, ' ', num('impair-corrupt', 'corrupt'), ' ',
        num('impair-loss', 'loss'), h('br'),
        h('button', {type: 'button', 'data-action': 'impair', text: 'apply',
          onclick: () => post('/api/impair', {link: l.name, direction: dir.value, corrupt: value('impair-corrupt'),
            loss: value('impair-loss')}, `impair ${l.name}`)}),
        h('button', {type: 'button', 'data-action': 'clear', text: 'clear',
          onclick: () => post('/api/impair', {link: l.name, direction: dir.value, clear: true},
            `clear ${l.name}`)})),
      ...(l.actions || []).map((a) => h('button', {type: 'button', 'data-action': a.id, text: a.label,
        onclick: () => post('/api/action', {link: l.name, action: a.id}, `${l.name}: ${a.label}`)}))));
  }

  // ------------------------------------------------------------------ the loop
  async function poll() {
    try {
      snap = await api('/api/state');
      if (snap.testbed === 'up' && (!topo || topo.run_id !== snap.run_id)) await loadTopology();
      render();
      renderActions();
    } catch (e) {
      pill('offline', 'offline');
      banner(`The netstack ui server does not answer (${e.message}); stopped?`, true);
    }
    setTimeout(poll, interval);
  }

  $('#token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const value = $('#token-input').value.trim();
    $('#token-input').value = '';
    if (!value) return;
    token = value;
    sessionStorage.setItem(TOKEN_KEY, value);
    checkAuth();
  });
  $('#lock').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    token = null;
    checkAuth();
  });
  svg.addEventListener('click', () => select(null));
  window.addEventListener('hashchange', () => {
    if (!/token=/.test(location.hash)) return;
    takeToken();
    checkAuth();
  });

  takeToken();
  checkAuth();
  poll();
})();
