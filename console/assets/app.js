// jobfleet console: a hash-routed single page over the HTTP API.
//
// Rules this file keeps (the page's Content-Security-Policy enforces the
// first two): no inline script and no eval; text from the API is inserted
// with textContent only (el() below), never as HTML; the token lives in
// sessionStorage and travels only in the Authorization header.
'use strict';

(function () {
  const TOKEN_KEY = 'jobfleet.token';
  const PAGE_SIZE = 25;
  let token = sessionStorage.getItem(TOKEN_KEY) || '';
  let me = null; // GET /v1/whoami
  let cleanup = null; // stops the current view's timers and streams
  let leaveGuard = null; // the current view's "has unsaved changes?", null for none
  let shownHash = ''; // the address of the view shown

  const $ = (id) => document.getElementById(id);

  // el builds an element. attrs: "text" sets textContent, "class" the
  // class, "on<event>" a listener, anything else an attribute. Children
  // are nodes or strings (inserted as text).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = String(v);
      else if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function status(msg) {
    $('status').textContent = msg || '';
  }

  class APIError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // request sends bodyText (JSON text, if given) and returns the reply
  // both parsed (doc) and as the server wrote it (text); it throws an
  // APIError with the server's message unless the reply is a success.
  async function request(method, path, bodyText) {
    const opts = { method, headers: { Authorization: 'Bearer ' + token }, cache: 'no-store', credentials: 'omit' };
    if (bodyText !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = bodyText;
    }
    const r = await fetch(path, opts);
    const text = await r.text();
    let doc = null;
    try { doc = text ? JSON.parse(text) : null; } catch (e) { doc = null; }
    if (!r.ok) {
      const msg = (doc && doc.error) || (r.status + ' ' + r.statusText);
      if (r.status === 401) signOut('The server refused the token: ' + msg);
      throw new APIError(r.status, msg);
    }
    return { doc, text };
  }

  async function api(method, path, body) {
    return (await request(method, path, body === undefined ? undefined : JSON.stringify(body))).doc;
  }

  const jobPath = (id, sub) => '/v1/jobs/' + encodeURIComponent(id) + (sub ? '/' + sub : '');
  const canWrite = (id) => me && (me.role === 'operator' || me.role === 'admin') && (id === undefined || id.startsWith(me.prefix || ''));

  // stream reads a server-sent event stream with fetch (EventSource cannot
  // send the Authorization header) and calls onEvent(name, data) per
  // event. It returns when the stream ends; it throws on errors.
  async function stream(path, signal, onEvent) {
    const r = await fetch(path, { headers: { Authorization: 'Bearer ' + token }, signal, cache: 'no-store', credentials: 'omit' });
    if (!r.ok) {
      let msg = r.status + ' ' + r.statusText;
      try { msg = (await r.json()).error || msg; } catch (e) { /* not JSON */ }
      if (r.status === 401) signOut('The server refused the token: ' + msg);
      throw new APIError(r.status, msg);
    }
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        let name = 'message';
        const data = [];
        for (const line of block.split('\n')) {
          if (line === '' || line.startsWith(':')) continue;
          const c = line.indexOf(':');
          const field = c < 0 ? line : line.slice(0, c);
          let v = c < 0 ? '' : line.slice(c + 1);
          if (v.startsWith(' ')) v = v.slice(1);
          if (field === 'event') name = v;
          else if (field === 'data') data.push(v);
        }
        if (data.length) onEvent(name, JSON.parse(data.join('\n')));
      }
    }
  }

  // ---- time formatting -------------------------------------------------

  function fmtUTC(iso) {
    if (!iso) return '';
    const d = new Date(iso);
    return isNaN(d) ? String(iso) : d.toISOString().replace('.000Z', 'Z');
  }

  function fmtZone(iso, zone) {
    if (!iso) return '';
    const d = new Date(iso);
    if (isNaN(d)) return String(iso);
    try {
      return new Intl.DateTimeFormat('sv-SE', {
        timeZone: zone || 'UTC', year: 'numeric', month: '2-digit', day: '2-digit',
        hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short',
      }).format(d);
    } catch (e) {
      return fmtUTC(iso);
    }
  }

  function fmtDuration(seconds) {
    if (seconds === null || seconds === undefined || isNaN(seconds)) return '';
    if (seconds < 1) return Math.round(seconds * 1000) + ' ms';
    if (seconds < 120) return seconds.toFixed(1) + ' s';
    if (seconds < 7200) return Math.round(seconds / 60) + ' min';
    if (seconds < 172800) return (seconds / 3600).toFixed(1) + ' h';
    return (seconds / 86400).toFixed(1) + ' d';
  }

  const between = (a, b) => (a && b ? (new Date(b) - new Date(a)) / 1000 : null);

  // keepFocus runs redraw, which replaces elements within box, and gives
  // the focus back to what replaced the element it was on: in the same
  // table row (data-run, data-job) the element of the same kind, or the
  // element with the same id (a pager's button). Refreshes and page
  // turns so leave a keyboard user where they were.
  function keepFocus(box, redraw) {
    const a = document.activeElement;
    if (!a || !box.contains(a) || a === box) { redraw(); return; }
    const row = a.closest('tr[data-run], tr[data-job]');
    const key = row ? (row.dataset.run !== undefined ? ['run', row.dataset.run] : ['job', row.dataset.job]) : null;
    const id = a.id;
    const tag = a.tagName;
    redraw();
    let next = null;
    if (key) {
      const tr = [...box.querySelectorAll('tr[data-' + key[0] + ']')].find((r) => r.dataset[key[0]] === key[1]);
      if (tr) next = [...tr.querySelectorAll(tag)][0] || tr;
    } else if (id) {
      next = document.getElementById(id);
    }
    // A pager's button that became disabled (the last page) passes the
    // focus to its enabled neighbour.
    if (next && next.disabled) next = [...next.parentElement.querySelectorAll('button')].find((b) => !b.disabled) || null;
    if (next) next.focus();
  }

  // keepQuery writes a view's search into the address (#/name/k=v&…)
  // without reloading the view, so that Back from a job, a reload or a
  // copied link shows the same search. Empty values are left out.
  function keepQuery(name, params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
    const s = q.toString();
    history.replaceState(null, '', '#/' + name + (s ? '/' + s : ''));
  }

  // ---- colours of owners ----------------------------------------------

  const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac', '#2f4b7c', '#a05195'];
  const colours = new Map(); // owner ID -> colour, stable for the page's life
  function colourOf(id) {
    if (!colours.has(id)) colours.set(id, PALETTE[colours.size % PALETTE.length]);
    return colours.get(id);
  }

  // ---- sign in ---------------------------------------------------------

  function signOut(msg) {
    token = '';
    me = null;
    sessionStorage.removeItem(TOKEN_KEY);
    if (cleanup) { cleanup(); cleanup = null; }
    $('view').replaceChildren();
    $('nav').hidden = true;
    $('signout').hidden = true;
    $('who').textContent = '';
    $('signin').hidden = false;
    $('signin-error').textContent = msg || '';
    $('token').focus();
  }

  async function signIn() {
    try {
      me = await api('GET', '/v1/whoami');
    } catch (e) {
      if (e.status !== 401) signOut('Cannot sign in: ' + e.message);
      return false;
    }
    if (me.role === 'worker') {
      // A worker credential may run the worker protocol only: every view
      // would answer 403.
      signOut('Credential ' + me.credential + ' is a worker credential: it may run the worker protocol only. Sign in with a viewer, operator or admin token.');
      return false;
    }
    $('signin').hidden = true;
    $('nav').hidden = false;
    $('signout').hidden = false;
    $('who').textContent = me.credential + ' (' + me.role + (me.prefix ? ', jobs under ' + me.prefix : '') + ')';
    return true;
  }

  // ---- views -----------------------------------------------------------

  function heading(text) {
    return el('h1', { text, tabindex: '-1' });
  }

  function errorBox(e) {
    return el('p', { class: 'error', role: 'alert', text: e.message || String(e) });
  }

  function overview(view) {
    let last = null; // previous overview, for the fire rate
    const fleet = el('div');
    const body = el('div');
    const charts = activityCharts();
    view.append(heading('Overview'), fleet, body, charts.node);
    const card = (label, value, cls, id) => el('div', { class: 'card', 'data-card': id }, el('div', { class: 'muted', text: label }), el('div', { class: 'v ' + (cls || ''), text: value }));
    async function loadFleet() {
      const act = await charts.load();
      if (!act) return;
      fleet.replaceChildren(...fleetCards(act, card));
    }
    async function load() {
      loadFleet();
      let ov;
      try {
        ov = await api('GET', '/v1/cluster/overview');
      } catch (e) {
        body.replaceChildren(errorBox(e));
        return;
      }
      let rate = 'measuring…';
      if (last && last.member === ov.member) {
        const dt = (new Date(ov.now) - new Date(last.now)) / 1000;
        if (dt > 0) rate = ((ov.activity.fires_total - last.activity.fires_total) / dt).toFixed(1);
      }
      last = ov;
      body.replaceChildren(...[
        el('div', { class: 'cards' },
          card('Members', ov.members.length),
          card('Partitions', ov.partitions),
          card('Unowned', ov.unowned, ov.unowned ? 'warn' : 'ok'),
          card('Moving', ov.moving, ov.moving ? 'warn' : 'ok'),
        ),
        el('h2', { text: 'Members' }),
        el('table', {},
          el('thead', {}, el('tr', {}, ['Member', 'Address', 'Registered', 'Registered for', 'Owned', 'Ring target'].map((h) => el('th', { scope: 'col', text: h })))),
          el('tbody', {}, ov.members.map((m) => el('tr', {},
            el('td', { text: m.id }), el('td', { text: m.addr }), el('td', { text: fmtUTC(m.registered_at) }),
            el('td', { class: 'num', text: fmtDuration(m.lease_age_seconds) }),
            el('td', { class: 'num', text: m.owned }), el('td', { class: 'num', text: m.targeted }))))),
        el('h2', { text: 'This member: ' + ov.member }),
        el('div', { class: 'cards' },
          card('Readiness', ov.ready ? 'ready' : 'not ready', ov.ready ? 'ok' : 'bad', 'member-ready'),
          card('Fires/s', rate, '', 'member-fires'),
          card('Lag p99 since start', fmtDuration(ov.activity.lag_p99_seconds) || '0 ms', '', 'member-lag'),
          card('Runs waiting', ov.activity.runs_waiting, '', 'member-waiting'),
          card('Runs running', ov.activity.runs_running, '', 'member-running'),
        ),
        ov.ready ? null : el('p', { class: 'warn', text: 'Not ready: ' + (ov.ready_reason || '') }),
        el('p', { class: 'muted', text: 'The member serving this page, since it started; waiting and running count the runs of the partitions it owns. Updated every 5 s.' }),
      ].filter(Boolean));
    }
    load();
    const t = setInterval(load, 5000);
    return () => clearInterval(t);
  }

  // ---- charts of the last hour (GET /v1/cluster/activity) ---------------

  const SVG_NS = 'http://www.w3.org/2000/svg';

  // svg builds an SVG element as el() builds HTML ones: "text" sets
  // textContent, "on<event>" a listener, anything else an attribute
  // (left out if undefined, null or false).
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = String(v);
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, String(v));
    }
    for (const c of children.flat()) if (c) e.append(c);
    return e;
  }

  // quantile estimates quantile q of lags counted in buckets (upper
  // bounds in bounds, the last bucket past them), as the server does.
  function quantile(buckets, bounds, q) {
    const n = buckets.reduce((a, b) => a + b, 0);
    if (!n) return 0;
    const rank = Math.max(1, Math.round(q * n));
    let seen = 0;
    for (let i = 0; i < buckets.length; i++) {
      seen += buckets[i];
      if (seen >= rank) return bounds[Math.min(i, bounds.length - 1)];
    }
    return bounds[bounds.length - 1];
  }

  // mergeMinutes adds up the minutes of members, by minute, over the hour
  // ending at now: counts and lag buckets add, the lag quantiles come from
  // the added buckets.
  function mergeMinutes(members, bounds, now) {
    const by = new Map();
    for (const m of members) {
      for (const x of m.minutes || []) {
        let t = by.get(x.start);
        if (!t) {
          t = { start: x.start, fires: 0, skipped: 0, succeeded: 0, failed: 0, dead: 0, cancelled: 0, running: 0, waiting: 0, buckets: new Array(bounds.length + 1).fill(0) };
          by.set(x.start, t);
        }
        for (const k of ['fires', 'skipped', 'succeeded', 'failed', 'dead', 'cancelled', 'running', 'waiting']) t[k] += x[k] || 0;
        (x.lag_buckets || []).forEach((c, i) => { t.buckets[i] += c; });
      }
    }
    // The hour ending with now's minute, minute by minute: minutes that
    // no member counted show as zero.
    const end = Math.floor(new Date(now).getTime() / 60000) * 60000;
    const out = [];
    for (let k = 59; k >= 0; k--) {
      const start = new Date(end - k * 60000).toISOString().replace('.000Z', 'Z');
      out.push(by.get(start) || { start, fires: 0, skipped: 0, succeeded: 0, failed: 0, dead: 0, cancelled: 0, running: 0, waiting: 0, buckets: new Array(bounds.length + 1).fill(0) });
    }
    for (const t of out) {
      t.p50 = quantile(t.buckets, bounds, 0.5);
      t.p99 = quantile(t.buckets, bounds, 0.99);
    }
    return out;
  }

  // chart draws minutes as an SVG figure: series are {key, label, cls,
  // kind: 'bar' (stacked) or 'line'}, fmt formats a value. Each bar and
  // point carries data-series, data-minute and data-value.
  function chart(title, minutes, series, fmt) {
    const W = 640, H = 150, L = 48, B = 18, T = 8;
    const n = Math.max(minutes.length, 1);
    const step = (W - L) / n;
    const stacked = (m) => series.filter((s) => s.kind === 'bar').reduce((a, s) => a + (m[s.key] || 0), 0);
    const top = Math.max(1e-9, ...minutes.map((m) => Math.max(stacked(m), ...series.filter((s) => s.kind === 'line').map((s) => m[s.key] || 0))));
    const y = (v) => T + (H - B - T) * (1 - v / top);
    const g = svg('g');
    minutes.forEach((m, i) => {
      let base = 0;
      for (const s of series.filter((s) => s.kind === 'bar')) {
        const v = m[s.key] || 0;
        if (v > 0) {
          g.append(svg('rect', { class: 'bar ' + s.cls, x: (L + i * step + 1).toFixed(1), width: Math.max(step - 2, 1).toFixed(1), y: y(base + v).toFixed(1), height: (y(base) - y(base + v)).toFixed(1), 'data-series': s.key, 'data-minute': m.start, 'data-value': v },
            svg('title', { text: fmtUTC(m.start) + ' ' + s.label + ': ' + fmt(v) })));
        }
        base += v;
      }
    });
    for (const s of series.filter((s) => s.kind === 'line')) {
      const pts = minutes.map((m, i) => (L + (i + 0.5) * step).toFixed(1) + ',' + y(m[s.key] || 0).toFixed(1));
      if (pts.length) g.append(svg('polyline', { class: 'line ' + s.cls, points: pts.join(' '), 'data-series': s.key }));
      minutes.forEach((m, i) => g.append(svg('circle', { class: 'point ' + s.cls, cx: (L + (i + 0.5) * step).toFixed(1), cy: y(m[s.key] || 0).toFixed(1), r: 2, 'data-series': s.key, 'data-minute': m.start, 'data-value': m[s.key] || 0 },
        svg('title', { text: fmtUTC(m.start) + ' ' + s.label + ': ' + fmt(m[s.key] || 0) }))));
    }
    const first = minutes.length ? fmtUTC(minutes[0].start).slice(11, 16) + ' UTC' : '';
    const mid = minutes.length > 30 ? fmtUTC(minutes[30].start).slice(11, 16) : '';
    const axis = [
      svg('line', { class: 'axis', x1: L, y1: H - B, x2: W, y2: H - B }),
      svg('text', { class: 'tick', x: L - 4, y: T + 10, 'text-anchor': 'end', text: fmt(top) }),
      svg('text', { class: 'tick', x: L - 4, y: H - B, 'text-anchor': 'end', text: '0' }),
      svg('text', { class: 'tick', x: L, y: H - 4, text: first }),
      svg('text', { class: 'tick', x: L + 30 * step, y: H - 4, 'text-anchor': 'middle', text: mid }),
      svg('text', { class: 'tick', x: W, y: H - 4, 'text-anchor': 'end', text: 'now' }),
    ];
    const summary = series.map((s) => s.label + ' ' + fmt(minutes.reduce((a, m) => (s.kind === 'bar' ? a + (m[s.key] || 0) : Math.max(a, m[s.key] || 0)), 0)) + (s.kind === 'bar' ? ' in all' : ' at most')).join(', ');
    return el('figure', { class: 'chart', 'data-chart': title },
      el('figcaption', {}, el('strong', { text: title }), ' ', series.map((s) => el('span', { class: 'key' }, el('span', { class: 'swatch ' + s.cls }), s.label))),
      (() => { const e = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': title + ' over the last ' + minutes.length + ' minutes: ' + summary }, axis, g); return e; })());
  }

  // fleetCards returns the overview's cards for the whole fleet from
  // GET /v1/cluster/activity's answer act: what every member published
  // for the partitions it owns, added up — fires and schedule lag over
  // the last five minutes, attempts running and runs waiting as last
  // sampled (members silent for two minutes left out), outcomes over the
  // hour. card(label, value, class, id) makes one.
  function fleetCards(act, card) {
    const minutes = mergeMinutes(act.members, act.lag_bounds, act.now);
    const last5 = minutes.slice(-5);
    const add = (ms, k) => ms.reduce((a, m) => a + (m[k] || 0), 0);
    const buckets = new Array(act.lag_bounds.length + 1).fill(0);
    for (const m of last5) m.buckets.forEach((c, i) => { buckets[i] += c; });
    const now = new Date(act.now).getTime();
    let running = 0, waiting = 0, fresh = 0;
    for (const m of act.members) {
      const x = (m.minutes || [])[(m.minutes || []).length - 1];
      if (!x || now - new Date(x.start).getTime() > 2 * 60000) continue;
      running += x.running || 0;
      waiting += x.waiting || 0;
      fresh++;
    }
    const n = (v) => String(Math.round(v));
    return [
      el('h2', { text: 'The fleet' }),
      el('div', { class: 'cards' },
        card('Fires, last 5 min', n(add(last5, 'fires')), '', 'fleet-fires'),
        card('Lag p99, last 5 min', fmtDuration(quantile(buckets, act.lag_bounds, 0.99)) || '0 ms', '', 'fleet-lag'),
        card('Attempts running', n(running), '', 'fleet-running'),
        card('Runs waiting', n(waiting), waiting ? 'warn' : 'ok', 'fleet-waiting'),
        card('Succeeded, last hour', n(add(minutes, 'succeeded')), '', 'fleet-succeeded'),
        card('Failed, last hour', n(add(minutes, 'failed')), add(minutes, 'failed') ? 'warn' : 'ok', 'fleet-failed'),
        card('Dead, last hour', n(add(minutes, 'dead')), add(minutes, 'dead') ? 'bad' : 'ok', 'fleet-dead'),
      ),
      el('p', { class: 'muted', text: 'Every member’s figures for the partitions it owns, added up (' + fresh + ' of ' + act.members.length + ' members published in the last two minutes).' }),
    ];
  }

  // activityCharts returns the overview's charts: node, and load() to
  // fetch and redraw them for the fleet or one member; load resolves to
  // the activity fetched (null if the fetch failed).
  function activityCharts() {
    const scope = el('select', { id: 'chart-scope', 'aria-label': 'Charts of' }, el('option', { value: '', text: 'the whole fleet' }));
    const box = el('div', { class: 'charts' });
    const note = el('p', { class: 'muted' });
    let last = null;
    const node = el('section', { 'aria-labelledby': 'charts-title' },
      el('h2', { id: 'charts-title', text: 'Last hour, per minute' }),
      el('label', {}, 'Charts of ', scope), note, box);
    const count = (v) => String(Math.round(v));
    function draw() {
      if (!last) return;
      const members = last.members.filter((m) => !scope.value || m.member === scope.value);
      const minutes = mergeMinutes(members, last.lag_bounds, last.now);
      box.replaceChildren(
        chart('Fires', minutes, [{ key: 'fires', label: 'fired', cls: 'st-running', kind: 'bar' }], count),
        chart('Outcomes', minutes, [
          { key: 'succeeded', label: 'succeeded', cls: 'st-succeeded', kind: 'bar' },
          { key: 'failed', label: 'failed', cls: 'st-failed', kind: 'bar' },
          { key: 'dead', label: 'dead', cls: 'st-dead', kind: 'bar' },
          { key: 'skipped', label: 'skipped', cls: 'st-skipped', kind: 'bar' },
        ], count),
        chart('Schedule lag', minutes, [
          { key: 'p50', label: 'p50', cls: 'st-succeeded', kind: 'line' },
          { key: 'p99', label: 'p99', cls: 'st-dead', kind: 'line' },
        ], (v) => fmtDuration(v) || '0 ms'),
        chart('Attempts', minutes, [
          { key: 'running', label: 'running', cls: 'st-running', kind: 'line' },
          { key: 'waiting', label: 'waiting', cls: 'st-failed', kind: 'line' },
        ], count),
      );
      const silent = last.members.filter((m) => !m.minutes.length).map((m) => m.member);
      note.textContent = (scope.value ? 'Member ' + scope.value : 'All ' + last.members.length + ' members, added up') +
        '; each member counts the partitions it owns, and publishes its figures every few seconds.' +
        (silent.length ? ' No figures yet from: ' + silent.join(', ') + '.' : '');
    }
    scope.addEventListener('change', draw);
    async function load() {
      try {
        last = await api('GET', '/v1/cluster/activity');
      } catch (e) {
        box.replaceChildren(errorBox(e));
        return null;
      }
      const chosen = scope.value;
      scope.replaceChildren(el('option', { value: '', text: 'the whole fleet' }), ...last.members.map((m) => el('option', { value: m.member, text: 'member ' + m.member })));
      scope.value = last.members.some((m) => m.member === chosen) ? chosen : '';
      draw();
      return last;
    }
    return { node, load };
  }

  function partitions(view) {
    const ctrl = new AbortController();
    const map = el('div', { class: 'map', role: 'group', 'aria-label': 'Partitions, coloured by owner' });
    const legend = el('div', { class: 'legend', 'aria-label': 'Owners' });
    const detail = el('div', { class: 'detail', 'aria-live': 'polite', text: 'Hover or focus a partition for its owner, epoch, target and since when (Tab to the map, then the arrow keys, Home and End).' });
    const note = el('p', { class: 'muted', 'aria-live': 'polite' });
    view.append(heading('Partition map'), note, legend, map, detail);
    let rows = [];
    let cells = [];
    // The map is one stop in the Tab order (a thousand cells would be a
    // thousand stops): only the current cell is tabbable, and the arrow
    // keys, Home and End move between cells.
    let current = 0;
    function focusCell(i) {
      if (!cells.length) return;
      i = Math.max(0, Math.min(cells.length - 1, i));
      cells[current].tabIndex = -1;
      current = i;
      cells[i].tabIndex = 0;
      cells[i].focus();
    }
    // columns counts the cells of the map's first row as laid out.
    function columns() {
      const top = cells[0].offsetTop;
      let n = 0;
      while (n < cells.length && cells[n].offsetTop === top) n++;
      return Math.max(1, n);
    }
    map.addEventListener('keydown', (ev) => {
      if (ev.key === 'ArrowRight') focusCell(current + 1);
      else if (ev.key === 'ArrowLeft') focusCell(current - 1);
      else if (ev.key === 'ArrowDown') focusCell(current + columns());
      else if (ev.key === 'ArrowUp') focusCell(current - columns());
      else if (ev.key === 'Home') focusCell(0);
      else if (ev.key === 'End') focusCell(cells.length - 1);
      else return;
      ev.preventDefault();
    });

    function label(r) {
      return 'partition ' + r.partition + ', owner ' + (r.owner || 'none') + ', epoch ' + r.epoch +
        ', target ' + (r.target || 'none') + (r.since ? ', since ' + fmtUTC(r.since) : '');
    }
    function paint(r) {
      const c = cells[r.partition];
      if (!c) return;
      c.className = 'cell' + (r.owner ? '' : ' none') + (r.owner !== r.target ? ' moving' : '');
      c.style.background = r.owner ? colourOf(r.owner) : '';
      c.dataset.owner = r.owner || '';
      c.setAttribute('aria-label', label(r));
      c.title = label(r);
    }
    function show(r) {
      detail.replaceChildren(el('dl', { class: 'kv' },
        el('dt', { text: 'Partition' }), el('dd', { text: r.partition }),
        el('dt', { text: 'Owner' }), el('dd', { text: r.owner || 'none (being acquired)' }),
        el('dt', { text: 'Epoch' }), el('dd', { text: r.epoch }),
        el('dt', { text: 'Target' }), el('dd', { text: r.target || 'none' }),
        el('dt', { text: 'Since' }), el('dd', { text: r.since ? fmtUTC(r.since) : 'before this member started watching' })));
    }
    function drawLegend() {
      const counts = new Map();
      for (const r of rows) counts.set(r.owner, (counts.get(r.owner) || 0) + 1);
      const owners = [...counts.keys()].sort();
      legend.replaceChildren(...owners.map((o) => {
        // Colours are set through the style property: the policy refuses
        // style attributes.
        const sw = el('span', { class: 'swatch' + (o ? '' : ' none'), 'aria-hidden': 'true' });
        if (o) sw.style.background = colourOf(o);
        return el('span', { class: 'legend-item', 'data-owner': o }, sw, (o || 'no owner') + ': ' + counts.get(o));
      }));
    }
    function snapshot(s) {
      const ids = [...new Set([...s.members.members.map((m) => m.id), ...s.assignments.map((r) => r.owner).filter(Boolean)])].sort();
      ids.forEach(colourOf);
      rows = s.assignments;
      if (current >= rows.length) current = 0;
      cells = rows.map((r) => {
        const c = el('button', { type: 'button', class: 'cell', 'data-partition': r.partition, tabindex: r.partition === current ? '0' : '-1' });
        c.addEventListener('focus', () => {
          if (current !== r.partition && cells[current]) cells[current].tabIndex = -1;
          current = r.partition;
          c.tabIndex = 0;
          show(rows[r.partition]);
        });
        c.addEventListener('mouseenter', () => show(rows[r.partition]));
        return c;
      });
      map.dataset.size = rows.length <= 256 ? 'l' : (rows.length <= 2048 ? 'm' : 's');
      map.replaceChildren(...cells);
      rows.forEach(paint);
      drawLegend();
      note.textContent = s.partitions + ' partitions, ' + s.members.members.length + ' members; live.';
    }
    let changes = 0;
    async function follow() {
      let wait = 500;
      while (!ctrl.signal.aborted) {
        try {
          await stream('/v1/cluster/partitions/watch', ctrl.signal, (name, data) => {
            wait = 500;
            if (name === 'snapshot') snapshot(data);
            else if (name === 'change') {
              rows[data.partition] = data;
              paint(data);
              changes++;
              drawLegend();
              note.textContent = rows.length + ' partitions; live, ' + changes + ' changes seen.';
            } else if (name === 'members') {
              data.members.forEach((m) => colourOf(m.id));
            }
          });
        } catch (e) {
          if (ctrl.signal.aborted) return;
          note.textContent = 'Stream interrupted (' + e.message + '); reconnecting…';
        }
        if (ctrl.signal.aborted) return;
        await new Promise((res) => setTimeout(res, wait));
        wait = Math.min(wait * 2, 10000);
      }
    }
    follow();
    return () => ctrl.abort();
  }

  function where(view, arg) {
    const input = el('input', { id: 'where-id', required: true, spellcheck: 'false', size: '40', value: arg || '' });
    const out = el('div', { id: 'where-result', 'aria-live': 'polite' });
    async function look(id) {
      out.replaceChildren(el('p', { class: 'muted', text: 'Looking…' }));
      try {
        const p = await api('GET', '/v1/cluster/placement?job=' + encodeURIComponent(id));
        out.replaceChildren(el('dl', { class: 'kv' },
          el('dt', { text: 'Job' }), el('dd', {}, p.exists ? el('a', { href: '#/job/' + encodeURIComponent(p.job), text: p.job }) : p.job + ' (no such job stored)'),
          el('dt', { text: 'Hash (xxhash64)' }), el('dd', { text: p.hash, 'data-field': 'hash' }),
          el('dt', { text: 'Partition' }), el('dd', { text: p.partition + ' of ' + p.partitions, 'data-field': 'partition' }),
          el('dt', { text: 'Ring target' }), el('dd', { text: p.target || 'none', 'data-field': 'target' }),
          el('dt', { text: 'Owner' }), el('dd', { text: p.owner || 'none', 'data-field': 'owner' }),
          el('dt', { text: 'Epoch' }), el('dd', { text: p.epoch, 'data-field': 'epoch' }),
          el('dt', { text: 'Owner since' }), el('dd', { text: p.owner_since ? fmtUTC(p.owner_since) : 'unknown (before this member started watching)' }),
          el('dt', { text: 'Why' }), el('dd', { text: p.reason, 'data-field': 'reason' })));
      } catch (e) {
        out.replaceChildren(errorBox(e));
      }
    }
    const form = el('form', { class: 'inline', onsubmit: (ev) => { ev.preventDefault(); location.hash = '#/where/' + encodeURIComponent(input.value); } },
      el('label', { for: 'where-id', text: 'Job ID' }), input, el('button', { type: 'submit', id: 'where-submit', text: 'Where is it?' }));
    view.append(heading('Where is a job'), el('p', { class: 'muted', text: 'Hash → partition → ring target → owner and epoch, as this member sees them.' }), form, out);
    if (arg) look(arg);
    return null;
  }

  // jobStatus is a job's status as the API reads it with its state
  // (active, paused by hand or by its owner, completed).
  function jobStatus(j) {
    return j.status || (j.paused ? 'paused' : 'active');
  }

  // overdueSince is when the job became overdue (expect_success_within:
  // none of its runs succeeded for that long), as its owner recorded it;
  // '' while it is not overdue.
  function overdueSince(j) {
    const o = (j.state || {}).overdue;
    return o ? o.since : '';
  }

  // statusCell is a listed job's status, with an "overdue" badge.
  function statusCell(j) {
    return el('td', {}, jobStatus(j), ...(overdueSince(j) ? [' ', el('span', { class: 'badge warn', 'data-field': 'overdue', title: 'No run succeeded within ' + j.expect_success_within + ' (since ' + fmtUTC(overdueSince(j)) + ')', text: 'overdue' })] : []));
  }

  // pausedBecause says why the job's owner paused it (pause_after_failures),
  // '' unless that pause holds (the job was not written since).
  function pausedBecause(j) {
    const p = (j.state || {}).pause;
    return p && p.revision === j.revision ? p.reason : '';
  }

  // nextFireCells fills a listed job's next-fire cells, in its zone and
  // in UTC. A listing carries no job's state, so they are read from
  // /next, as its owner will fire them.
  function nextFireCells(j, local, utc) {
    api('GET', jobPath(j.id, 'next') + '?count=1').then((n) => {
      const f = (n.fires || [])[0];
      const text = (show) => (j.paused ? 'paused' : (f ? show(f.utc) : 'none'));
      local.textContent = text((t) => fmtZone(t, j.timezone));
      utc.textContent = text(fmtUTC);
    }, () => { local.textContent = '?'; utc.textContent = '?'; });
  }

  function jobs(view, arg) {
    const q = new URLSearchParams(arg || '');
    const prefix = el('input', { id: 'jobs-prefix', value: q.get('prefix') || me.prefix || '', spellcheck: 'false' });
    const paused = el('select', { id: 'jobs-paused' },
      el('option', { value: '', text: 'all' }), el('option', { value: 'active', text: 'active' }), el('option', { value: 'paused', text: 'paused' }));
    paused.value = q.get('paused') || '';
    const last = el('select', { id: 'jobs-last' },
      ['', 'succeeded', 'failed', 'dead', 'cancelled', 'running', 'pending', 'skipped', 'none'].map((s) => el('option', { value: s, text: s || 'any' })));
    last.value = q.get('last') || '';
    const table = el('tbody');
    const pager = el('div', { class: 'actions' });
    const note = el('p', { class: 'muted', id: 'jobs-note', 'aria-live': 'polite' });
    const cursors = ['']; // cursors of the pages seen, for Previous
    let page = 0;
    const ctrl = new AbortController();

    async function load() {
      note.textContent = 'Loading…';
      let list;
      try {
        list = await api('GET', '/v1/jobs?state=true&limit=' + PAGE_SIZE + '&prefix=' + encodeURIComponent(prefix.value) +
          (paused.value ? '&paused=' + (paused.value === 'paused') : '') + (cursors[page] ? '&cursor=' + encodeURIComponent(cursors[page]) : ''));
      } catch (e) {
        note.replaceChildren(errorBox(e));
        return;
      }
      if (ctrl.signal.aborted) return;
      cursors[page + 1] = list.next_cursor;
      const trs = list.jobs.map((j) => {
        const lastCell = el('td', { text: '…' });
        const localCell = el('td', { text: '…', 'data-field': 'next-local' });
        const utcCell = el('td', { text: '…', 'data-field': 'next-utc' });
        const tr = el('tr', { 'data-job': j.id },
          el('td', {}, el('a', { href: '#/job/' + encodeURIComponent(j.id), text: j.id })),
          el('td', { text: j.schedule || (j.run_at ? 'once at ' + fmtUTC(j.run_at) : '') }),
          statusCell(j),
          localCell,
          utcCell,
          lastCell);
        nextFireCells(j, localCell, utcCell);
        api('GET', jobPath(j.id, 'runs') + '?limit=1').then((r) => {
          const s = r.runs.length ? r.runs[0].status : 'none';
          lastCell.textContent = s;
          lastCell.className = statusClass(s);
          if (last.value) {
            tr.hidden = s !== last.value;
            countShown();
          }
        }, () => { lastCell.textContent = '?'; });
        return tr;
      });
      keepFocus(view, () => table.replaceChildren(...trs));
      // The prefix and the state are filtered on the server; the last
      // run's status is known only per row (one request each), so that
      // filter hides rows of the page loaded.
      function countShown() {
        const shown = trs.filter((tr) => !tr.hidden).length;
        // replaceChildren inserts null as the text "null": leave it out.
        note.replaceChildren(...[
          'Page ' + (page + 1) + ': ' + list.jobs.length + (list.jobs.length === 1 ? ' job' : ' jobs') + (paused.value ? ' ' + paused.value : '') +
            (last.value ? ', ' + shown + ' of them with a last run ' + last.value + ' (the last-run filter looks at this page only)' : '') +
            (!list.jobs.length && list.next_cursor ? ' (none among the jobs searched so far: Next page searches on)' : '') + '.',
          (last.value === 'dead' || last.value === 'failed') ? el('span', {}, ' Runs failing across the fleet: ', el('a', { href: '#/failing', text: 'Failing runs' }), '.') : null,
        ].filter(Boolean));
      }
      countShown();
      keepFocus(view, () => pager.replaceChildren(
        el('button', { type: 'button', id: 'jobs-prev', text: 'Previous page', disabled: page === 0, onclick: () => { page--; load(); } }),
        el('button', { type: 'button', id: 'jobs-next', text: 'Next page', disabled: !list.next_cursor, onclick: () => { page++; load(); } })));
    }
    const form = el('form', { class: 'inline', onsubmit: (ev) => {
      ev.preventDefault();
      keepQuery('jobs', { prefix: prefix.value, paused: paused.value, last: last.value });
      cursors.length = 1; page = 0; load();
    } },
      el('label', { for: 'jobs-prefix' }, 'ID prefix', prefix),
      el('label', { for: 'jobs-paused' }, 'State', paused),
      el('label', { for: 'jobs-last' }, 'Last run', last),
      el('button', { type: 'submit', id: 'jobs-search', text: 'Search' }));
    view.append(heading('Jobs'),
      canWrite() ? el('div', { class: 'actions' }, el('button', { type: 'button', id: 'new-job', text: 'New job', onclick: () => { location.hash = '#/new'; } })) : null,
      form, note,
      el('table', { id: 'jobs-table' },
        el('thead', {}, el('tr', {}, ['Job', 'Schedule', 'State', 'Next fire (job’s zone)', 'Next fire (UTC)', 'Last run'].map((h) => el('th', { scope: 'col', text: h })))),
        table),
      pager);
    load();
    return () => ctrl.abort();
  }

  // attemptList shows attempts with their times, error and output.
  function attemptList(atts) {
    return atts.map((a) => el('div', {},
      el('dl', { class: 'kv' },
        el('dt', { text: 'Attempt' }), el('dd', { text: a.attempt }),
        el('dt', { text: 'Worker' }), el('dd', { text: a.worker || '' }),
        el('dt', { text: 'Started' }), el('dd', { text: fmtUTC(a.started_at) }),
        el('dt', { text: 'Finished' }), el('dd', { text: fmtUTC(a.finished_at) }),
        el('dt', { text: 'Duration' }), el('dd', { text: fmtDuration(between(a.started_at, a.finished_at)) })),
      a.error ? el('pre', { class: 'error', text: a.error }) : null,
      a.output ? el('pre', { text: a.output }) : null));
  }

  const statusClass = (s) => (s === 'dead' || s === 'failed' ? 'error' : (s === 'succeeded' ? 'ok' : (s === 'cancelled' ? 'warn' : '')));
  const runActive = (s) => s === 'pending' || s === 'running' || s === 'failed';
  const runLink = (id, text) => el('a', { href: '#/run/' + encodeURIComponent(id), text });

  // itemCounts says how a run's items stand: "12/16 succeeded, 1 running".
  function itemCounts(r) {
    const n = {};
    for (const it of r.items || []) n[it.status] = (n[it.status] || 0) + 1;
    const parts = [(n.succeeded || 0) + '/' + r.items.length + ' succeeded'];
    for (const s of ['running', 'failed', 'pending', 'dead', 'skipped']) if (n[s]) parts.push(n[s] + ' ' + s);
    return parts.join(', ');
  }

  // runSpan returns the first start and the last end of a run's attempts,
  // its items' included (no end while one runs).
  function runSpan(r) {
    const chains = (r.items && r.items.length) ? r.items.map((it) => it.attempts || []) : [r.attempts || []];
    let first = null; let last = null; let open = false;
    for (const atts of chains) {
      if (!atts.length) continue;
      if (!first || atts[0].started_at < first) first = atts[0].started_at;
      const end = atts[atts.length - 1].finished_at;
      if (!end) open = true;
      else if (!last || end > last) last = end;
    }
    return [first, open ? null : last];
  }

  function runRow(r) {
    const atts = r.attempts || [];
    const lastAtt = atts.length ? atts[atts.length - 1] : null;
    const [first, end] = runSpan(r);
    let what;
    if (r.items && r.items.length) {
      what = runLink(r.run_id, (r.broadcast ? 'broadcast, ' : '') + itemCounts(r));
    } else if (atts.length) {
      what = el('details', {}, el('summary', { text: atts.length + ' attempt' + (atts.length === 1 ? '' : 's') }), attemptList(atts));
    } else {
      what = el('span', { class: 'muted', text: 'none yet' });
    }
    return el('tr', { 'data-run': r.run_id },
      el('td', {}, runLink(r.run_id, fmtUTC(r.scheduled_at))),
      el('td', { class: statusClass(r.status), text: r.status }),
      el('td', { text: fmtDuration(between(first, end)) }),
      el('td', { text: r.reason || (lastAtt && lastAtt.error) || '' }),
      el('td', {}, what));
  }

  // Graphs: the steps of a run or a job, a job's dependencies. A graph is
  // an SVG drawn here: its nodes as boxes in layers, left to right (a
  // node needing none in the first, any other one layer right of the
  // deepest node it needs), an arrow from each need to the node needing
  // it.
  const BOX_W = 204; const BOX_H = 46; const GAP_X = 48; const GAP_Y = 14;
  let graphs = 0; // numbers each graph's arrow head, whose ID must be unique

  // depths returns each node's layer by ID. A need naming no node, or
  // closing a cycle, is passed over.
  function depths(nodes) {
    const byId = new Map(nodes.map((n) => [n.id, n]));
    const depth = new Map();
    const onPath = new Set();
    function of(n) {
      if (depth.has(n.id)) return depth.get(n.id);
      onPath.add(n.id);
      let d = 0;
      for (const id of n.needs || []) {
        if (byId.has(id) && !onPath.has(id)) d = Math.max(d, of(byId.get(id)) + 1);
      }
      onPath.delete(n.id);
      depth.set(n.id, d);
      return d;
    }
    nodes.forEach(of);
    return depth;
  }

  const clipText = (s, n) => (s.length > n ? s.slice(0, n - 1) + '\u2026' : s);

  // graph draws nodes, each {id, needs, title, sub, cls, label, onpick}:
  // a box g.node[data-node=id] of class cls, showing title and sub,
  // announced as label, calling onpick on a click, Enter or Space; an
  // edge path.edge[data-from][data-to] per need. Boxes are drawn once;
  // paintGraph updates them.
  function graph(nodes, ariaLabel) {
    const depth = depths(nodes);
    const columns = [];
    for (const n of nodes) (columns[depth.get(n.id)] = columns[depth.get(n.id)] || []).push(n);
    const pos = new Map();
    columns.forEach((col, x) => col.forEach((n, y) => pos.set(n.id, { x: x * (BOX_W + GAP_X), y: y * (BOX_H + GAP_Y) })));
    const width = columns.length * (BOX_W + GAP_X) - GAP_X;
    const height = Math.max(...columns.map((c) => c.length)) * (BOX_H + GAP_Y) - GAP_Y;
    const arrow = 'arrow-' + (++graphs);
    const edges = [];
    for (const n of nodes) {
      for (const need of n.needs || []) {
        const a = pos.get(need);
        const b = pos.get(n.id);
        if (!a || depth.get(need) >= depth.get(n.id)) continue;
        const x1 = a.x + BOX_W; const y1 = a.y + BOX_H / 2;
        const x2 = b.x - 4; const y2 = b.y + BOX_H / 2;
        const mid = (x1 + x2) / 2;
        edges.push(svg('path', { class: 'edge', 'data-from': need, 'data-to': n.id, 'marker-end': 'url(#' + arrow + ')',
          d: 'M' + x1 + ',' + y1 + ' C' + mid + ',' + y1 + ' ' + mid + ',' + y2 + ' ' + x2 + ',' + y2 }));
      }
    }
    const boxes = nodes.map((n) => {
      const pick = () => n.onpick && n.onpick();
      const g = svg('g', { class: 'node', 'data-node': n.id, transform: 'translate(' + pos.get(n.id).x + ',' + pos.get(n.id).y + ')',
        tabindex: n.onpick ? '0' : null, role: n.onpick ? 'button' : 'img',
        onclick: pick, onkeydown: (ev) => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); pick(); } } },
      svg('title'), svg('rect', { width: BOX_W, height: BOX_H, rx: 6 }),
      svg('text', { class: 'title', x: 10, y: 19 }), svg('text', { class: 'sub', x: 10, y: 37 }));
      return g;
    });
    const s = svg('svg', { class: 'graph', width: width + 8, height: height + 8, viewBox: '-4 -4 ' + (width + 8) + ' ' + (height + 8), role: 'group', 'aria-label': ariaLabel },
      svg('defs', {}, svg('marker', { id: arrow, viewBox: '0 0 8 8', refX: 7, refY: 4, markerWidth: 8, markerHeight: 8, orient: 'auto' },
        svg('path', { d: 'M0,0 L8,4 L0,8 z' }))),
      edges, boxes);
    paintGraph(s, nodes);
    return s;
  }

  // paintGraph updates the boxes of graph s to nodes (the same IDs).
  function paintGraph(s, nodes) {
    for (const n of nodes) {
      const g = s.querySelector('g.node[data-node="' + CSS.escape(n.id) + '"]');
      if (!g) continue;
      g.setAttribute('class', 'node ' + (n.cls || ''));
      g.querySelector('text.title').textContent = clipText(n.title, 22);
      g.querySelector('text.sub').textContent = clipText(n.sub || '', 28);
      g.querySelector('title').textContent = n.label || n.title;
      g.setAttribute('aria-label', n.label || n.title);
    }
  }

  // showGraph draws nodes in box, or only repaints them if the graph
  // drawn there has the same nodes and edges (the focus stays put).
  function showGraph(box, nodes, ariaLabel) {
    const shape = JSON.stringify(nodes.map((n) => [n.id, n.needs || []]));
    const s = box.querySelector('svg.graph');
    if (s && box.dataset.shape === shape) { paintGraph(s, nodes); return; }
    box.dataset.shape = shape;
    box.replaceChildren(graph(nodes, ariaLabel));
  }

  // stepItems returns the items of step s of run r.
  const stepItems = (r, s) => (r.items || []).slice(s.first_item, s.first_item + s.items);

  // stepSummary says how step s of run r stands: "succeeded · 2 attempts · 1.2 s".
  function stepSummary(r, s) {
    const items = stepItems(r, s);
    const n = items.reduce((sum, it) => sum + (it.attempts || []).length, 0);
    const [first, end] = runSpan({ items });
    const parts = [s.status];
    if (s.sharded) parts.push(items.filter((it) => it.status === 'succeeded').length + '/' + items.length + ' items');
    else if (n) parts.push(n + ' attempt' + (n === 1 ? '' : 's'));
    const d = fmtDuration(between(first, end));
    if (d) parts.push(d);
    return parts.join(' \u00b7 ');
  }

  // stepResult returns what step s of run r hands the steps needing it:
  // its item's result, an array by shard for a sharded step; undefined
  // if none returned one.
  function stepResult(r, s) {
    const items = stepItems(r, s);
    if (!items.some((it) => it.result !== undefined)) return undefined;
    const res = items.map((it) => (it.result === undefined ? null : it.result));
    return s.sharded ? res : res[0];
  }

  // stepDetail shows step s of run r: its fields, result and each item's
  // attempts with their error and output.
  function stepDetail(r, s) {
    const items = stepItems(r, s);
    const result = stepResult(r, s);
    const [first, end] = runSpan({ items });
    const dd = (k, v, attrs) => (v === undefined || v === '' ? [] : [el('dt', { text: k }), el('dd', Object.assign({ text: v }, attrs || {}))]);
    return [
      el('dl', { class: 'kv' },
        dd('Step', s.id),
        dd('Status', s.status, { class: statusClass(s.status), id: 'step-status' }),
        dd('Needs', (s.needs || []).join(', ') + (s.when && s.when !== 'success' ? ' (when ' + s.when + ')' : '')),
        dd('Reason', s.reason),
        dd('Items', s.sharded ? items.length + (s.min_succeeded ? ', ' + s.min_succeeded + ' required' : '') + (s.max_parallel ? ', at most ' + s.max_parallel + ' at once' : '') : undefined),
        dd('Attempts', String(items.reduce((sum, it) => sum + (it.attempts || []).length, 0))),
        dd('Duration', fmtDuration(between(first, end)) || (first ? 'running' : ''))),
      result === undefined ? null : el('h3', { text: 'Result' }),
      result === undefined ? null : el('pre', { id: 'step-result', text: JSON.stringify(result, null, 2) }),
      ...items.flatMap((it) => [
        s.sharded ? el('h3', { text: 'Item ' + (it.index - s.first_item) + ' (' + it.status + ')' + (it.reason ? ': ' + it.reason : '') }) : null,
        ...attemptList(it.attempts || [])]),
    ].filter(Boolean);
  }

  // run shows one run (#/run/ID): its fields; for a credential that may
  // change its job while the run is pending, awaiting a retry or running,
  // a Cancel button (POST /v1/runs/{id}/cancel, after a confirmation);
  // for a sharded or broadcast run a grid of its items coloured by status,
  // one Tab stop (the arrow keys move within it), the focused or clicked
  // item's attempts below it, else the run's attempts; while an attempt
  // of a run of one item runs, a live tail of its output (GET
  // /v1/runs/{id}/output?follow=1, the last 64 KiB shown). Reloaded every
  // second while the run is active, else every 10 s.
  function run(view, id) {
    const path = '/v1/runs/' + encodeURIComponent(id);
    const info = el('div');
    const actions = el('div', { class: 'actions', role: 'group', 'aria-label': 'Actions' });
    const msg = el('p', { id: 'run-message', 'aria-live': 'polite' });
    const grid = el('div', { class: 'map items', id: 'items-grid', role: 'group', 'aria-label': 'Items, coloured by status' });
    const legend = el('div', { class: 'legend' });
    const detail = el('div', { class: 'detail', id: 'item-detail', 'aria-live': 'polite' });
    const steps = el('div', { class: 'graph-wrap', id: 'steps-graph' });
    const stepBox = el('div', { class: 'detail', id: 'step-detail', 'aria-live': 'polite' });
    const atts = el('div');
    const notes = el('div', { id: 'run-notifications' });
    const liveHead = el('h2', { text: 'Live output', hidden: true });
    const liveNote = el('p', { class: 'muted', id: 'run-live-note', 'aria-live': 'polite', hidden: true });
    const live = el('pre', { id: 'run-live', class: 'output', hidden: true });
    view.append(heading('Run ' + id), msg, actions, info, legend, steps, stepBox, grid, detail, liveHead, liveNote, live, atts, notes);
    // A run of steps: its steps' graph, the picked step's attempts below.
    let picked = null; // the ID of the step shown below the graph
    let latestRun = null;
    function showStep(sid) {
      const s = (latestRun.steps || []).find((x) => x.id === sid);
      if (!s) return;
      picked = sid;
      for (const g of steps.querySelectorAll('g.node')) g.classList.toggle('picked', g.dataset.node === sid);
      stepBox.replaceChildren(...stepDetail(latestRun, s));
    }
    function paintSteps(r) {
      latestRun = r;
      showGraph(steps, r.steps.map((s) => ({
        id: s.id, needs: s.needs, title: s.id, sub: stepSummary(r, s), cls: 'st-' + s.status,
        label: 'step ' + s.id + ', ' + stepSummary(r, s) + ((s.needs || []).length ? ', needs ' + s.needs.join(', ') : ''),
        onpick: () => showStep(s.id),
      })), 'Steps, coloured by status; pick one to see its attempts');
      showStep(picked || r.steps[0].id);
    }
    let following = null; // the AbortController of the live tail, while it runs
    const liveMax = 64 << 10;
    let endedAttempt = 0; // the last attempt whose tail ended: not followed again
    // follow tails the running attempt's output until it ends.
    async function follow() {
      following = new AbortController();
      liveHead.hidden = liveNote.hidden = live.hidden = false;
      live.textContent = '';
      liveNote.textContent = 'Following the running attempt\u2019s output\u2026';
      try {
        await stream(path + '/output?follow=1', following.signal, (name, ev) => {
          if (name === 'output') {
            let t = live.textContent + (ev.skipped ? '[\u2026 ' + ev.skipped + ' bytes not held \u2026]\n' : '') + ev.data;
            if (t.length > liveMax) t = t.slice(t.length - liveMax);
            live.textContent = t;
            live.scrollTop = live.scrollHeight;
          } else if (name === 'end') {
            endedAttempt = ev.attempt;
            liveNote.textContent = 'Attempt ' + ev.attempt + ' has ended; its output as the run keeps it is below.';
          }
        });
      } catch (e) {
        if (!stopped) liveNote.textContent = 'Live output unavailable: ' + e.message;
      }
      following = null;
    }
    let current = 0;
    let cells = [];
    let items = [];
    function showItem(i) {
      const it = items[i];
      if (!it) return;
      detail.replaceChildren(
        el('dl', { class: 'kv' },
          el('dt', { text: 'Item' }), el('dd', { text: it.index + ' of ' + items.length }),
          el('dt', { text: 'Status' }), el('dd', { class: statusClass(it.status), text: it.status }),
          it.worker ? el('dt', { text: 'Pinned to' }) : null, it.worker ? el('dd', { text: it.worker }) : null,
          it.reason ? el('dt', { text: 'Reason' }) : null, it.reason ? el('dd', { text: it.reason }) : null,
          el('dt', { text: 'Attempts' }), el('dd', { text: (it.attempts || []).length })),
        ...attemptList(it.attempts || []));
    }
    const label = (it) => 'item ' + it.index + ', ' + it.status + ((it.attempts || []).length ? ', ' + it.attempts.length + ' attempt' + (it.attempts.length === 1 ? '' : 's') + ' on ' + it.attempts[it.attempts.length - 1].worker : '') + (it.worker && !(it.attempts || []).length ? ', pinned to ' + it.worker : '');
    function move(key) {
      const perRow = Math.max(1, cells.filter((c) => c.offsetTop === cells[0].offsetTop).length);
      const to = { ArrowRight: current + 1, ArrowLeft: current - 1, ArrowDown: current + perRow, ArrowUp: current - perRow, Home: 0, End: cells.length - 1 }[key];
      if (to === undefined) return false;
      cells[Math.max(0, Math.min(cells.length - 1, to))].focus();
      return true;
    }
    grid.addEventListener('keydown', (ev) => { if (move(ev.key)) ev.preventDefault(); });
    function paintItems(r) {
      items = r.items || [];
      if (cells.length !== items.length) {
        cells = items.map((it, i) => {
          const c = el('button', { type: 'button', class: 'cell', 'data-item': i, tabindex: i === current ? '0' : '-1' });
          c.addEventListener('focus', () => {
            if (current !== i && cells[current]) cells[current].tabIndex = -1;
            current = i;
            c.tabIndex = 0;
            showItem(i);
          });
          c.addEventListener('click', () => showItem(i));
          return c;
        });
        grid.dataset.size = items.length <= 256 ? 'l' : (items.length <= 2048 ? 'm' : 's');
        grid.replaceChildren(...cells);
      }
      items.forEach((it, i) => {
        cells[i].className = 'cell st-' + it.status;
        cells[i].dataset.status = it.status;
        cells[i].setAttribute('aria-label', label(it));
        cells[i].title = label(it);
      });
      legend.replaceChildren(...['pending', 'running', 'failed', 'succeeded', 'dead', 'skipped'].map((s) => el('span', {}, el('span', { class: 'swatch cell st-' + s }), s)));
      if (items.length) showItem(Math.min(current, items.length - 1));
    }
    let timer = null;
    let stopped = false;
    let drawn = null; // what the actions offer: '' (nothing), 'cancel' or 'cancel items'

    async function cancelRun() {
      msg.className = '';
      msg.textContent = 'Cancelling…';
      try {
        const r = await api('POST', path + '/cancel');
        msg.className = 'ok';
        msg.textContent = r && r.status === 'cancelled' ? 'Cancelled.' : 'Cancel requested: the run\u2019s owner applies it in a moment.';
      } catch (e) {
        msg.className = 'error';
        msg.textContent = 'Cancel failed: ' + e.message;
      }
      load(); // now; the reload loop goes on
    }

    function drawActions(r, hasItems) {
      const offer = runActive(r.status) && canWrite(r.job_id) ? (hasItems ? 'cancel items' : 'cancel') : '';
      if (offer === drawn) return;
      drawn = offer;
      if (!offer) { actions.replaceChildren(); return; }
      const what = hasItems ? 'Its items not ended are not run; its running items are told to stop. ' : 'It is not retried; a running attempt is told to stop. ';
      const confirmBox = el('span', { hidden: true },
        el('span', { text: 'Cancel this run? ' + what }),
        el('button', { type: 'button', class: 'danger', id: 'confirm-cancel-run', text: 'Yes, cancel it', onclick: () => { confirmBox.hidden = true; cancelRun(); } }),
        el('button', { type: 'button', id: 'keep-run', text: 'Keep it', onclick: () => { confirmBox.hidden = true; $('cancel-run').focus(); } }));
      actions.replaceChildren(
        el('button', { type: 'button', id: 'cancel-run', class: 'danger', text: 'Cancel run…', onclick: () => { confirmBox.hidden = false; $('confirm-cancel-run').focus(); } }),
        confirmBox);
    }

    async function load() {
      let r;
      try {
        r = await api('GET', path);
      } catch (e) {
        if (stopped) return false;
        info.replaceChildren(errorBox(e));
        actions.replaceChildren();
        drawn = null;
        return false;
      }
      if (stopped) return false;
      const [first, end] = runSpan(r);
      const hasItems = !!(r.items && r.items.length);
      drawActions(r, hasItems);
      info.replaceChildren(el('dl', { class: 'kv' },
        el('dt', { text: 'Job' }), el('dd', {}, el('a', { href: '#/job/' + encodeURIComponent(r.job_id), text: r.job_id })),
        el('dt', { text: 'Status' }), el('dd', { id: 'run-status', class: statusClass(r.status), text: r.status }),
        r.reason ? el('dt', { text: 'Reason' }) : null, r.reason ? el('dd', { id: 'run-reason', text: r.reason }) : null,
        r.caused_by ? el('dt', { text: 'Caused by' }) : null,
        r.caused_by ? el('dd', { id: 'run-caused-by' }, el('a', { href: '#/run/' + encodeURIComponent(r.caused_by.run), text: r.caused_by.run }),
          ' (' + r.caused_by.job + ', ' + r.caused_by.status + ')') : null,
        el('dt', { text: 'Scheduled' }), el('dd', { text: fmtUTC(r.scheduled_at) }),
        el('dt', { text: 'Fired' }), el('dd', { text: fmtUTC(r.fired_at) + ' by ' + r.owner + ' (epoch ' + r.epoch + ', partition ' + r.partition + ')' }),
        el('dt', { text: 'Duration' }), el('dd', { text: fmtDuration(between(first, end)) || (first ? 'running' : '') }),
        r.steps && r.steps.length ? el('dt', { text: 'Steps' }) : null,
        r.steps && r.steps.length ? el('dd', { id: 'run-steps', text: itemCounts({ items: r.steps }).replace(/\bsucceeded\b/, 'steps succeeded') +
          (r.round ? '; round ' + r.round + ' (started again from a step)' : '') }) : null,
        r.trace_id ? el('dt', { text: 'Trace ID' }) : null, r.trace_id ? el('dd', { id: 'run-trace', class: 'mono', text: r.trace_id }) : null,
        hasItems ? el('dt', { text: 'Items' }) : null,
        hasItems ? el('dd', { id: 'run-items', text: (r.broadcast ? 'broadcast to ' + r.items.length + ' workers: ' : '') + itemCounts(r) +
          (r.min_succeeded ? '; ' + r.min_succeeded + ' required' : '') + (r.max_parallel ? '; at most ' + r.max_parallel + ' at once' : '') }) : null));
      const hasSteps = !!(r.steps && r.steps.length);
      grid.hidden = detail.hidden = !hasItems || hasSteps;
      legend.hidden = !hasItems;
      steps.hidden = stepBox.hidden = !hasSteps;
      if (hasSteps) paintSteps(r);
      if (hasItems) paintItems(r);
      atts.replaceChildren(...(hasItems ? [] : [el('h2', { text: 'Attempts' }),
        ...((r.attempts || []).length ? attemptList(r.attempts) : [el('p', { class: 'muted', text: 'No attempt yet.' })])]));
      notes.replaceChildren(...((r.notifications || []).length ? [el('h2', { text: 'Notifications' }), deliveriesTable(r.notifications)] : []));
      if (r.status === 'running' && !hasItems && !following && (r.attempts || []).length > endedAttempt) follow();
      return runActive(r.status);
    }
    const tick = async () => {
      const again = await load();
      if (!stopped) timer = setTimeout(tick, again ? 1000 : 10000);
    };
    tick();
    return () => { stopped = true; clearTimeout(timer); if (following) following.abort(); };
  }

  // deliveriesTable lists notification deliveries: event, URL, result
  // (given up and dropped ones marked), tries and the last error.
  function deliveriesTable(ds) {
    return el('table', {},
      el('thead', {}, el('tr', {}, ['Event', 'URL', 'Result', 'Tries', 'At', 'Last error'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, ds.map((d) => el('tr', { 'data-result': d.result },
        el('td', { text: d.event + (d.attempt ? ' (attempt ' + d.attempt + ')' : '') }),
        el('td', { text: d.url }),
        el('td', { class: d.result === 'delivered' ? 'ok' : (d.result === 'retrying' ? 'warn' : 'error'), text: d.result.replace('_', ' ') }),
        el('td', { text: String(d.tries) }),
        el('td', { text: fmtUTC(d.at) }),
        el('td', { text: d.last_error || '' })))));
  }

  function runsTable(runs) {
    return el('table', {},
      el('thead', {}, el('tr', {}, ['Scheduled', 'Status', 'Duration', 'Reason / last error', 'Attempts'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, runs.map(runRow)));
  }

  function job(view, id) {
    const info = el('div');
    const actions = el('div', { class: 'actions', role: 'group', 'aria-label': 'Actions' });
    const fires = el('div');
    const runs = el('div');
    const runsChart = el('div', { id: 'job-runs-chart' });
    const msg = el('p', { 'aria-live': 'polite' });
    const deps = el('div', { id: 'job-dependencies' });
    const stepsOf = el('div', { id: 'job-steps' });
    view.append(heading('Job ' + id), msg, actions, info, deps, stepsOf, el('h2', { text: 'Next fires' }), fires, el('h2', { text: 'Runs' }), runsChart, runs);
    if (flash) { msg.className = 'ok'; msg.textContent = flash; flash = ''; } // what the form saved

    async function act(what, method, path) {
      msg.className = '';
      msg.textContent = what + '…';
      try {
        await api(method, path);
        msg.className = 'ok';
        msg.textContent = what + ': done.';
        if (method === 'DELETE') { location.hash = '#/jobs'; return; }
        fastUntil = Date.now() + 10000; // the run of a trigger appears in a moment
        tick();
      } catch (e) {
        msg.className = 'error';
        msg.textContent = what + ' failed: ' + e.message;
      }
    }

    // The buttons are redrawn only when what they offer changes (read
    // only, pause or resume), not on every reload: a redraw would take
    // the keyboard focus away and close an open delete question.
    let drawn = null;
    function drawActions(j) {
      const offer = !canWrite(id) ? 'read' : (j.paused ? 'resume' : 'pause');
      if (offer === drawn) return;
      const refocus = document.activeElement && (document.activeElement.id === 'pause' || document.activeElement.id === 'resume');
      drawn = offer;
      if (offer === 'read') {
        actions.replaceChildren(el('span', { class: 'muted', text: 'Your credential may read this job, not change it.' }));
        return;
      }
      const confirmBox = el('span', { hidden: true },
        el('span', { text: 'Delete job ' + id + ' and its runs? ' }),
        el('button', { type: 'button', class: 'danger', id: 'confirm-delete', text: 'Yes, delete', onclick: () => act('Delete', 'DELETE', jobPath(id)) }),
        // Cancel hides the question and gives focus back to Delete…,
        // not to the page's start.
        el('button', { type: 'button', id: 'cancel-delete', text: 'Cancel', onclick: () => { confirmBox.hidden = true; $('delete').focus(); } }));
      actions.replaceChildren(
        j.paused
          ? el('button', { type: 'button', id: 'resume', text: 'Resume', onclick: () => act('Resume', 'POST', jobPath(id, 'resume')) })
          : el('button', { type: 'button', id: 'pause', text: 'Pause', onclick: () => act('Pause', 'POST', jobPath(id, 'pause')) }),
        el('button', { type: 'button', id: 'trigger', text: 'Trigger now', onclick: () => act('Trigger', 'POST', jobPath(id, 'trigger')) }),
        el('button', { type: 'button', id: 'edit', text: 'Edit', onclick: () => { location.hash = '#/edit/' + encodeURIComponent(id); } }),
        el('button', { type: 'button', id: 'delete', class: 'danger', text: 'Delete…', onclick: () => { confirmBox.hidden = false; $('confirm-delete').focus(); } }),
        confirmBox);
      if (refocus) $(offer).focus(); // Pause became Resume, or back
    }

    // drawDependencies draws the jobs j runs after (its after), j, and
    // the jobs that run after it (those the credential may read), each
    // box a link to its job; nothing for a job with neither.
    async function drawDependencies(j) {
      let after = [];
      try {
        after = (await api('GET', jobPath(id, 'dependents'))).dependents || [];
      } catch (e) {
        after = []; // a server that keeps no dependency index
      }
      const before = j.after || [];
      if (!before.length && !after.length) { deps.replaceChildren(); return; }
      const states = (d) => (d.on && d.on.length ? d.on : ['succeeded']);
      const open = (job) => () => { location.hash = '#/job/' + encodeURIComponent(job); };
      const nodes = [
        ...before.map((d) => ({ id: 'after:' + d.job, title: d.job, sub: 'on ' + states(d).join('/'), cls: 'job', label: 'job ' + d.job + ': this job fires when a run of it ends ' + states(d).join(' or '), onpick: open(d.job) })),
        { id: 'job:' + id, needs: before.map((d) => 'after:' + d.job), title: id, sub: 'this job', cls: 'job this', label: 'this job, ' + id },
        ...after.map((d) => ({ id: 'before:' + d.job, needs: ['job:' + id], title: d.job, sub: 'on ' + states(d).join('/'), cls: 'job', label: 'job ' + d.job + ': fires when a run of this job ends ' + states(d).join(' or '), onpick: open(d.job) })),
      ];
      if (!deps.firstChild) deps.append(el('h2', { text: 'Dependencies' }), el('div', { class: 'graph-wrap' }));
      showGraph(deps.lastChild, nodes, 'Dependencies: the jobs this one runs after, and those that run after it');
    }

    // drawSteps draws the steps of a job made of steps; a step's box
    // shows its executor, and says when, shards and retry.
    function drawSteps(j) {
      if (!(j.steps && j.steps.length)) { stepsOf.replaceChildren(); return; }
      const nodes = j.steps.map((s) => {
        const parts = [s.executor.type];
        if (s.shards) parts.push((s.shards.count || (s.shards.params || []).length) + ' shards');
        if (s.when && s.when !== 'success') parts.push('when ' + s.when);
        if (s.retry && s.retry.max_attempts) parts.push('retry ' + s.retry.max_attempts);
        const sub = parts.join(' \u00b7 ');
        return { id: s.id, needs: s.needs, title: s.id, sub, cls: 'step', label: 'step ' + s.id + ', ' + sub + ((s.needs || []).length ? ', needs ' + s.needs.join(', ') : '') };
      });
      if (!stepsOf.firstChild) stepsOf.append(el('h2', { text: 'Steps' }), el('div', { class: 'graph-wrap' }));
      showGraph(stepsOf.lastChild, nodes, 'Steps of the job, each after the steps it needs');
    }

    async function load() {
      let j;
      try {
        j = await api('GET', jobPath(id));
      } catch (e) {
        info.replaceChildren(errorBox(e));
        actions.replaceChildren();
        drawn = null;
        return;
      }
      drawActions(j);
      const st = j.state || {};
      // As for the runs below: the document stays open, and the focus
      // stays on what it was on (the partition link, the summary).
      const docWasOpen = !!info.querySelector('details[open]');
      const focusedId = info.contains(document.activeElement) ? document.activeElement.id : '';
      info.replaceChildren(
        el('dl', { class: 'kv' },
          el('dt', { text: 'State' }), el('dd', { id: 'job-state', text: jobStatus(j) }),
          ...(pausedBecause(j) ? [el('dt', { text: 'Paused because' }), el('dd', { id: 'job-paused-reason', class: 'warn', text: pausedBecause(j) })] : []),
          ...(j.expect_success_within ? [el('dt', { text: 'Expect success within' }), el('dd', { id: 'job-expect-success', text: j.expect_success_within +
            (st.last_succeeded_at ? ' (last success ' + fmtUTC(st.last_succeeded_at) + ')' : '') })] : []),
          ...(overdueSince(j) ? [el('dt', { text: 'Overdue' }), el('dd', { id: 'job-overdue' }, el('span', { class: 'badge warn', text: 'overdue' }),
            ' since ' + fmtUTC(overdueSince(j)) + ': no run succeeded within ' + j.expect_success_within)] : []),
          el('dt', { text: 'Schedule' }), el('dd', { text: j.schedule || (j.run_at ? 'once at ' + fmtUTC(j.run_at) : '') }),
          el('dt', { text: 'Time zone' }), el('dd', { text: j.timezone || 'UTC' }),
          el('dt', { text: 'Partition' }), el('dd', {}, el('a', { id: 'job-partition', href: '#/where/' + encodeURIComponent(id), text: String(j.partition) })),
          el('dt', { text: 'Fired / skipped / dropped' }), el('dd', { text: (st.fired || 0) + ' / ' + (st.skipped || 0) + ' / ' + (st.dropped || 0) }),
          el('dt', { text: 'Misfires' }), el('dd', { id: 'job-misfires', text: String(st.missed || 0) }),
          ...(j.max_fires ? [el('dt', { text: 'Runs of max_fires' }), el('dd', { id: 'job-max-fires', text: (st.scheduled_runs || 0) + ' of ' + j.max_fires })] : []),
          ...(j.jitter ? [el('dt', { text: 'Jitter' }), el('dd', { text: j.jitter })] : []),
          ...(j.exclude ? [el('dt', { text: 'Excludes' }), el('dd', { text: j.exclude.join(', ') })] : []),
          ...(j.not_before || j.not_after ? [el('dt', { text: 'Window' }), el('dd', { text: (j.not_before ? fmtUTC(j.not_before) : '…') + ' to ' + (j.not_after ? fmtUTC(j.not_after) : '…') })] : [])),
        el('details', { id: 'job-document', open: docWasOpen }, el('summary', { id: 'job-document-summary', text: 'Document' }), el('pre', { text: JSON.stringify(j, null, 2) })));
      if (focusedId && $(focusedId)) $(focusedId).focus();
      await drawDependencies(j);
      drawSteps(j);
      try {
        const n = await api('GET', jobPath(id, 'next') + '?count=10');
        const list = n.fires || [];
        // A paused job's times are those it would fire if resumed: say
        // so above them, as jobfleet job next does.
        fires.replaceChildren(...(list.length
          ? [n.paused ? el('p', { class: 'warn', id: 'fires-note', text: 'Paused: it fires these times only if resumed before them.' }) : null,
            // A jittered job fires after its scheduled times: show both.
            el('table', {}, el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'In ' + (n.timezone || 'UTC') }), el('th', { scope: 'col', text: 'UTC' }),
              ...(list.some((f) => f.scheduled_at) ? [el('th', { scope: 'col', text: 'Scheduled (UTC)' })] : []))),
              el('tbody', {}, list.map((f) => el('tr', {}, el('td', { text: f.local }), el('td', { text: f.utc }),
                ...(list.some((x) => x.scheduled_at) ? [el('td', { text: f.scheduled_at || f.utc })] : [])))))]
          : [el('p', { class: 'muted', text: n.paused ? 'Paused: no fires until resumed.' : (n.status === 'completed' ? 'Completed: no further fires.' : 'No further fires.') })]).filter(Boolean));
      } catch (e) {
        fires.replaceChildren(el('p', { class: 'muted', text: (st.next ? 'Next fire: ' + fmtZone(st.next, j.timezone) + ' (' + fmtUTC(st.next) + '). ' : '') +
          (e.status === 404 ? 'This server does not list further fires.' : 'Cannot list further fires: ' + e.message) }));
      }
      try {
        const r = await api('GET', jobPath(id, 'runs') + '?limit=50');
        runsChart.replaceChildren(r.runs.length ? runsDurationChart(r.runs) : '');
        r.runs = r.runs.slice(0, 20);
        // The reload keeps the runs whose attempts are open open, and the
        // focus on the run it was on.
        const rowOf = (e) => (e && e.closest ? e.closest('tr[data-run]') : null);
        const opened = new Set([...runs.querySelectorAll('tr[data-run] details[open]')].map((d) => rowOf(d).dataset.run));
        const focused = runs.contains(document.activeElement) ? rowOf(document.activeElement) : null;
        runs.replaceChildren(r.runs.length ? runsTable(r.runs) : el('p', { class: 'muted', text: 'No runs stored.' }));
        for (const tr of runs.querySelectorAll('tr[data-run]')) {
          const d = tr.querySelector('details');
          if (d && opened.has(tr.dataset.run)) d.open = true;
          if (focused && tr.dataset.run === focused.dataset.run) (tr.querySelector('summary') || tr).focus();
        }
        active = r.runs.some((run) => run.status === 'pending' || run.status === 'running');
      } catch (e) {
        runs.replaceChildren(errorBox(e));
      }
    }
    // Reloaded every 10 s, or every second while a run is pending or
    // running and for 10 s after an action.
    // An action reloads at once (tick): a reload still in flight then
    // sets no timer when it ends, or each action made while one loads
    // would start one more reload loop.
    let active = false;
    let fastUntil = 0;
    let timer = null;
    let stopped = false;
    let latest = 0; // the number of the latest tick
    const tick = async () => {
      const mine = ++latest;
      clearTimeout(timer);
      await load();
      if (!stopped && mine === latest) timer = setTimeout(tick, active || Date.now() < fastUntil ? 1000 : 10000);
    };
    tick();
    return () => { stopped = true; clearTimeout(timer); };
  }

  // ---- the job form (#/new, #/edit/<job ID>) ----------------------------

  // SERVER_SET are the fields of a job document that the server sets and
  // ignores on writes: the form neither shows nor sends them, but for
  // revision, which an edit sends back so that it replaces only the
  // version it read (409 otherwise).
  const SERVER_SET = new Set(['partition', 'created_at', 'updated_at', 'resumed_at', 'state', 'status', 'revision']);
  // FORM_FIELDS are the fields of a job document that the form's inputs
  // own; every other field is in its "Other fields" JSON, as the server
  // wrote it, and goes back as written.
  const FORM_FIELDS = new Set(['id', 'schedule', 'timezone', 'run_at', 'executor', 'retry', 'timeout', 'concurrency_policy', 'misfire_policy', 'paused', 'history', 'delete_after']);
  // The members of the form's objects that it has inputs for; others
  // (from a newer server) are kept and sent back as they came.
  const GROUP_FIELDS = {
    executor: ['type', 'url', 'method', 'headers', 'body', 'follow_redirects', 'command'],
    retry: ['max_attempts', 'initial_backoff', 'max_backoff'],
    history: ['max_runs', 'max_age'],
  };
  // OTHER_FIELDS are the other fields of the job document, which the
  // "Other fields" JSON holds.
  const OTHER_FIELDS = ['payload', 'jitter', 'not_before', 'not_after', 'max_fires', 'exclude', 'pause_after_failures', 'expect_success_within',
    'notify', 'steps', 'shards', 'placement', 'limits', 'priority', 'after'];
  const PREVIEW_COUNT = 5;
  const PREVIEW_DELAY_MS = 300; // debounce of the schedule's preview

  let flash = ''; // said once by the next job page (after a save)

  // members splits the text of a JSON object into its members, [key,
  // text of the value] in order, without parsing the values: a value goes
  // back to the server as the text it came as, so that an edit keeps
  // what JavaScript's numbers cannot hold (integers past 2^53 in a
  // payload). It throws a SyntaxError unless text is one JSON object.
  function members(text) {
    const doc = JSON.parse(text); // checks the syntax, with the browser's message
    if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new SyntaxError('want a JSON object {…}');
    const out = [];
    let i = text.indexOf('{') + 1;
    const space = () => { while (i < text.length && ' \t\r\n'.includes(text[i])) i++; };
    const string = () => { // text[i] is '"': skips past its closing quote
      const start = i++;
      while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
      i++;
      return text.slice(start, i);
    };
    for (;;) {
      space();
      if (text[i] === ',') { i++; space(); }
      if (text[i] === '}') return out;
      const key = JSON.parse(string());
      space();
      i++; // ':'
      space();
      const start = i;
      let depth = 0;
      for (; i < text.length; i++) {
        const c = text[i];
        if (c === '"') { string(); i--; continue; }
        if (c === '{' || c === '[') depth++;
        else if (c === '}' || c === ']') { if (depth === 0) break; depth--; }
        else if (c === ',' && depth === 0) break;
      }
      out.push([key, dedent(text.slice(start, i).trimEnd())]);
    }
  }

  // dedent removes from the lines of an indented JSON value, but its
  // first, the indentation they share (JSON strings hold no raw line
  // breaks, so only white space between tokens changes).
  function dedent(raw) {
    const lines = raw.split('\n');
    if (lines.length < 2) return raw;
    const n = Math.min(...lines.slice(1).map((l) => l.length - l.trimStart().length));
    return [lines[0], ...lines.slice(1).map((l) => l.slice(n))].join('\n');
  }

  // objectText writes members ([key, JSON text]) as a JSON object
  // indented by two spaces.
  function objectText(entries) {
    if (!entries.length) return '{}';
    return '{' + entries.map(([k, v]) => '\n  ' + JSON.stringify(k) + ': ' + v.split('\n').join('\n  ')).join(',') + '\n}';
  }

  // FieldProblem is an input's value that cannot be sent, named by the
  // field's path as the server names fields.
  class FieldProblem extends Error {
    constructor(field, message) {
      super(field + ': ' + message);
      this.field = field;
    }
  }

  // errorPath returns the field an API error names at its start
  // ("retry.max_backoff: …", "executor.headers[X-A]: …",
  // "after[0].job \"x\": …"), or ''.
  function errorPath(msg) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+|\[[^\]]*\])*)[: ]/.exec(msg || '');
    return m ? m[1] : '';
  }

  // jobForm shows the form that creates a job (id null) or edits job id:
  // the fields most jobs set as inputs, the rest of the document as
  // JSON, the schedule's next fires as typed, and the server's verdict
  // next to the field it names.
  function jobForm(view, id) {
    const create = id === null;
    view.append(heading(create ? 'New job' : 'Edit job ' + id));
    if (create ? !canWrite() : !canWrite(id)) {
      view.append(el('p', { class: 'muted', id: 'form-readonly', text: 'Your credential (' + me.role + ') may read jobs, not ' + (create ? 'create them.' : 'change this one.') }));
      return null;
    }
    let stopped = false;
    let revision = 0; // of the job edited
    let initial = null; // the document the form made when filled (leaveGuard below); null: nothing to lose
    let extras = {}; // group: [[key, text]] of members the form has no input for
    const fields = {}; // error path: {input, err}
    const summary = el('div', { id: 'form-summary', role: 'alert' });
    const conflict = el('div', { id: 'form-conflict', class: 'conflict', role: 'alert', hidden: true });

    // field lays out one input with its label, help and error slot; key
    // is the field's path, as the server's errors name it.
    function field(key, label, input, help) {
      const fid = 'f-' + key.replace(/[^a-z0-9]+/g, '-');
      input.id = fid;
      const err = el('p', { class: 'field-error error', id: 'err-' + key, 'data-field': key });
      const helpId = help ? fid + '-help' : null;
      input.setAttribute('aria-describedby', [helpId, err.id].filter(Boolean).join(' '));
      fields[key] = { input, err };
      const box = input.type === 'checkbox'
        ? el('div', { class: 'field check' }, el('label', { for: fid }, input, ' ' + label))
        : el('div', { class: 'field' }, el('label', { for: fid, text: label }), input);
      if (help) box.append(el('p', { class: 'muted help', id: helpId, text: help }));
      box.append(err);
      return box;
    }
    const text = (attrs) => el('input', Object.assign({ type: 'text', spellcheck: 'false', autocomplete: 'off' }, attrs || {}));
    const area = (rows, placeholder) => el('textarea', { rows, spellcheck: 'false', placeholder });
    const select = (options) => el('select', {}, options.map(([v, t]) => el('option', { value: v, text: t })));

    const inID = text({ value: me.prefix || '', required: true });
    const inWhen = select([['schedule', 'on a schedule (cron, descriptor or @every)'], ['run_at', 'once, at a time'], ['none', 'once, as soon as it is saved (or only after other jobs’ runs)']]);
    const inSchedule = text({ placeholder: '0 2 * * *' });
    const zones = el('datalist', { id: 'f-zones' }, (Intl.supportedValuesOf ? Intl.supportedValuesOf('timeZone') : []).map((z) => el('option', { value: z })));
    const inZone = text({ placeholder: 'UTC', list: 'f-zones' });
    const inRunAt = text({ placeholder: '2026-12-24T18:00:00+01:00' });
    const preview = el('div', { id: 'form-preview', class: 'detail', 'aria-live': 'polite' });
    const inType = select([['http', 'http: call a URL'], ['shell', 'shell: run a program'], ['handler', 'a named handler'], ['', 'none (a job of steps: see Other fields)']]);
    const inHandler = text({ placeholder: 'send-invoice' });
    const inURL = text({ placeholder: 'https://hooks.example.com/deploy' });
    const inMethod = text({ placeholder: 'POST', list: 'f-methods' });
    const methods = el('datalist', { id: 'f-methods' }, ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].map((m) => el('option', { value: m })));
    const inHeaders = area(3, '{"Authorization": {"secret_env": "DEPLOY_HOOK_TOKEN"}}');
    const inBody = area(3, '{"ref": "main"}');
    const inRedirects = el('input', { type: 'checkbox' });
    const inCommand = area(2, '["/bin/sh", "-c", "pg_dump shop | gzip > /backups/shop.gz"]');
    const inAttempts = text({ inputmode: 'numeric', placeholder: '1' });
    const inBackoff = text({ placeholder: '1s' });
    const inMaxBackoff = text({ placeholder: '1m' });
    const inTimeout = text({ placeholder: 'the fleet’s default, or none' });
    const inConcurrency = select([['', 'default (allow)'], ['allow', 'allow: runs may overlap'], ['forbid', 'forbid: skip while one runs'], ['replace', 'replace: cancel the earlier run']]);
    const inMisfire = select([['', 'default (run_once)'], ['run_once', 'run_once: the latest missed time'], ['skip', 'skip: no missed time'], ['run_all', 'run_all: every missed time']]);
    const inPaused = el('input', { type: 'checkbox' });
    const inMaxRuns = text({ inputmode: 'numeric', placeholder: 'the fleet’s default' });
    const inMaxAge = text({ placeholder: 'the fleet’s default' });
    const inDeleteAfter = text({ placeholder: 'the fleet’s default, or never' });
    const inOther = area(8, '{}');
    inOther.value = '{}';
    const inJSON = area(24, '');

    const whenBox = {
      schedule: field('schedule', 'Schedule', inSchedule, 'Cron (5 fields, or 6 with seconds first), @hourly, @daily…, or @every 90s.'),
      run_at: field('run_at', 'Run at', inRunAt, 'An RFC 3339 time with its offset.'),
    };
    const zoneBox = field('timezone', 'Time zone', inZone, 'The IANA zone the schedule is read in (default UTC); the preview shows times in it.');
    const handlerBox = field('executor.handler', 'Handler', inHandler, 'The name a worker registered (w.Handle("send-invoice", fn)).');
    const httpBox = el('div', { class: 'group' },
      field('executor.url', 'URL', inURL), field('executor.method', 'Method', inMethod, 'Default POST.'), methods,
      field('executor.headers', 'Headers (JSON)', inHeaders, 'Values are strings or {"secret_env": "NAME"}.'),
      field('executor.body', 'Body (JSON)', inBody, 'Sent instead of the payload; leave empty to send the payload.'),
      field('executor.follow_redirects', 'Follow redirects', inRedirects));
    const shellBox = el('div', { class: 'group' }, field('executor.command', 'Command (JSON array)', inCommand, 'The program and its arguments, run without a shell unless you name one.'));

    function showWhen() {
      whenBox.schedule.hidden = inWhen.value !== 'schedule';
      whenBox.run_at.hidden = inWhen.value !== 'run_at';
      zoneBox.hidden = inWhen.value === 'none';
    }
    function showType() {
      handlerBox.hidden = inType.value !== 'handler';
      httpBox.hidden = inType.value !== 'http';
      shellBox.hidden = inType.value !== 'shell';
    }

    // ---- the preview of the schedule's fires

    let previewTimer = null;
    let previewSeq = 0; // the number of the latest preview asked
    function previewSoon() {
      clearTimeout(previewTimer);
      previewTimer = setTimeout(showPreview, PREVIEW_DELAY_MS);
    }
    function clearError(key) {
      const f = fields[key];
      f.err.textContent = '';
      f.input.removeAttribute('aria-invalid');
    }
    function setError(key, msg) {
      const f = fields[key];
      f.err.textContent = msg;
      f.input.setAttribute('aria-invalid', 'true');
    }
    async function showPreview() {
      const mine = ++previewSeq;
      const when = inWhen.value;
      for (const k of ['schedule', 'run_at', 'timezone']) clearError(k);
      const say = (t, cls) => preview.replaceChildren(el('p', { class: cls || 'muted', text: t }));
      if (when === 'none') { say('No schedule: it runs once as soon as it is saved, or, with "after" in Other fields, only after those jobs’ runs.'); return; }
      const value = (when === 'schedule' ? inSchedule : inRunAt).value.trim();
      if (!value) { say(when === 'schedule' ? 'Type a schedule to see when it fires.' : 'Type a time to see when it fires.'); return; }
      const req = { count: PREVIEW_COUNT };
      req[when] = value;
      if (inZone.value.trim()) req.timezone = inZone.value.trim();
      preview.setAttribute('aria-busy', 'true');
      let n;
      try {
        n = await api('POST', '/v1/schedule:preview', req);
      } catch (e) {
        if (stopped || mine !== previewSeq) return;
        preview.removeAttribute('aria-busy');
        const path = errorPath(e.message);
        if (fields[path]) setError(path, e.message);
        say('No fires: ' + e.message, 'error');
        return;
      }
      if (stopped || mine !== previewSeq) return;
      preview.removeAttribute('aria-busy');
      const list = n.fires || [];
      if (!list.length) { say('It never fires again from now.'); return; }
      preview.replaceChildren(
        el('p', { class: 'muted', text: 'Next ' + list.length + ' fires of this ' + (when === 'schedule' ? 'schedule' : 'time') + ', as the server computes them' +
          ' (the job’s jitter, window, max_fires and calendars, in Other fields, are not applied):' }),
        el('table', { id: 'form-fires' },
          el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'In ' + (n.timezone || 'UTC') }), el('th', { scope: 'col', text: 'UTC' }))),
          el('tbody', {}, list.map((f) => el('tr', {}, el('td', { 'data-field': 'local', text: f.local }), el('td', { 'data-field': 'utc', text: f.utc }))))));
    }
    for (const i of [inSchedule, inRunAt, inZone]) i.addEventListener('input', previewSoon);
    inWhen.addEventListener('change', () => { showWhen(); showPreview(); });
    inType.addEventListener('change', showType);

    // ---- from a document to the inputs, and back

    // choose selects v in sel, adding it if sel has no such option (a
    // policy of a newer server), so that saving keeps it.
    function choose(sel, v) {
      if (![...sel.options].some((o) => o.value === v)) sel.append(el('option', { value: v, text: v }));
      sel.value = v;
    }

    // fill sets the inputs from the text of a job document as the server
    // sent it.
    function fill(text) {
      const doc = JSON.parse(text);
      const raw = new Map(members(text));
      const str = (v) => (v === undefined || v === null ? '' : String(v));
      revision = doc.revision || 0;
      inID.value = doc.id;
      inWhen.value = doc.schedule ? 'schedule' : (doc.run_at ? 'run_at' : 'none');
      inSchedule.value = str(doc.schedule);
      inRunAt.value = str(doc.run_at);
      inZone.value = str(doc.timezone);
      const ex = doc.executor || {};
      inType.value = !doc.executor ? '' : (ex.type === 'http' || ex.type === 'shell' ? ex.type : 'handler');
      inHandler.value = inType.value === 'handler' ? str(ex.type) : '';
      inURL.value = str(ex.url);
      inMethod.value = str(ex.method);
      inHeaders.value = ex.headers ? JSON.stringify(ex.headers, null, 2) : '';
      const exRaw = raw.has('executor') ? new Map(members(raw.get('executor'))) : new Map();
      inBody.value = exRaw.has('body') ? exRaw.get('body') : '';
      inRedirects.checked = !!ex.follow_redirects;
      inCommand.value = ex.command ? JSON.stringify(ex.command) : '';
      const r = doc.retry || {};
      inAttempts.value = str(r.max_attempts);
      inBackoff.value = str(r.initial_backoff);
      inMaxBackoff.value = str(r.max_backoff);
      inTimeout.value = str(doc.timeout);
      choose(inConcurrency, str(doc.concurrency_policy));
      choose(inMisfire, str(doc.misfire_policy));
      inPaused.checked = !!doc.paused;
      const h = doc.history || {};
      inMaxRuns.value = str(h.max_runs);
      inMaxAge.value = str(h.max_age);
      inDeleteAfter.value = str(doc.delete_after);
      extras = {};
      for (const [g, known] of Object.entries(GROUP_FIELDS)) {
        extras[g] = raw.has(g) ? members(raw.get(g)).filter(([k]) => !known.includes(k)) : [];
      }
      inOther.value = objectText([...raw].filter(([k]) => !FORM_FIELDS.has(k) && !SERVER_SET.has(k)));
      showWhen();
      showType();
    }

    // documentText returns the text of the document the inputs make, or
    // throws a FieldProblem. An empty input leaves its field out (the
    // default); a number field sends what is not a whole number as a
    // string, for the server to refuse naming the field.
    function documentText() {
      const out = [];
      const put = (list, k, v) => { if (v !== undefined) list.push([k, JSON.stringify(v)]); };
      const val = (i) => i.value.trim() || undefined;
      const num = (i) => { const v = val(i); return v !== undefined && /^-?\d{1,15}$/.test(v) ? Number(v) : v; };
      const json = (key, i, want) => {
        const v = i.value.trim();
        if (!v) return undefined;
        let parsed;
        try { parsed = JSON.parse(v); } catch (e) { throw new FieldProblem(key, 'not JSON: ' + e.message); }
        if (want === 'object' && (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))) throw new FieldProblem(key, 'want a JSON object {…}');
        if (want === 'array' && !Array.isArray(parsed)) throw new FieldProblem(key, 'want a JSON array ["program", "argument", …]');
        return want === 'text' ? v : parsed; // text: sent as written
      };
      const group = (name, list) => {
        const all = [...list, ...(extras[name] || [])];
        if (all.length) out.push([name, objectText(all)]);
      };
      put(out, 'id', create ? inID.value : id);
      if (inWhen.value === 'schedule') put(out, 'schedule', val(inSchedule));
      if (inWhen.value === 'run_at') put(out, 'run_at', val(inRunAt));
      if (inWhen.value !== 'none') put(out, 'timezone', val(inZone));
      if (inType.value) {
        const ex = [];
        put(ex, 'type', inType.value === 'handler' ? inHandler.value.trim() : inType.value);
        if (inType.value === 'http') {
          put(ex, 'url', val(inURL));
          put(ex, 'method', val(inMethod));
          put(ex, 'headers', json('executor.headers', inHeaders, 'object'));
          const body = json('executor.body', inBody, 'text');
          if (body !== undefined) ex.push(['body', body]);
          if (inRedirects.checked) put(ex, 'follow_redirects', true);
        }
        if (inType.value === 'shell') put(ex, 'command', json('executor.command', inCommand, 'array'));
        group('executor', ex);
      }
      const retry = [];
      put(retry, 'max_attempts', num(inAttempts));
      put(retry, 'initial_backoff', val(inBackoff));
      put(retry, 'max_backoff', val(inMaxBackoff));
      group('retry', retry);
      put(out, 'timeout', val(inTimeout));
      put(out, 'concurrency_policy', inConcurrency.value || undefined);
      put(out, 'misfire_policy', inMisfire.value || undefined);
      put(out, 'paused', inPaused.checked);
      const history = [];
      put(history, 'max_runs', num(inMaxRuns));
      put(history, 'max_age', val(inMaxAge));
      group('history', history);
      put(out, 'delete_after', val(inDeleteAfter));
      let other;
      try {
        other = members(inOther.value.trim() || '{}');
      } catch (e) {
        throw new FieldProblem('other', 'not a JSON object: ' + e.message);
      }
      for (const [k, v] of other) {
        if (FORM_FIELDS.has(k)) throw new FieldProblem('other', '"' + k + '" has its input in the form above: set it there, not here');
        if (SERVER_SET.has(k)) throw new FieldProblem('other', '"' + k + '" is set by the server: leave it out');
        out.push([k, v]);
      }
      if (!create) out.push(['revision', String(revision)]);
      return objectText(out);
    }

    // ---- saving

    function clearErrors() {
      for (const k of Object.keys(fields)) clearError(k);
      summary.replaceChildren();
      summary.className = '';
      conflict.hidden = true;
    }

    // showFieldError puts msg next to the field key and in the summary,
    // and moves the focus to the field.
    function showFieldError(key, msg) {
      summary.className = 'error';
      summary.replaceChildren(el('p', { text: 'Not saved: ' + msg }));
      if (!fields[key]) return;
      setError(key, msg);
      fields[key].input.focus();
    }

    // fieldOfError returns the input an API error is about: the field
    // its path names (the nearest input: "executor.headers[X-A]" is the
    // headers' input, "retry" the first of retry's), Other fields for
    // the fields there, '' if it names none.
    function fieldOfError(msg) {
      const path = errorPath(msg);
      if (!path) return '';
      const top = path.split(/[.[]/)[0];
      if (!FORM_FIELDS.has(top)) {
        let other = [];
        try { other = members(inOther.value.trim() || '{}').map(([k]) => k); } catch (e) { /* shown on save */ }
        return other.includes(top) || OTHER_FIELDS.includes(top) ? 'other' : '';
      }
      let best = '';
      for (const k of Object.keys(fields)) {
        if ((path === k || path.startsWith(k + '.') || path.startsWith(k + '[')) && k.length > best.length) best = k;
      }
      best = best || Object.keys(fields).find((k) => k.startsWith(path + '.')) || '';
      // The type of a named handler is typed in its own input.
      return best === 'executor.type' && inType.value === 'handler' ? 'executor.handler' : best;
    }

    async function save(ev) {
      ev.preventDefault();
      clearErrors();
      let body;
      try {
        body = jsonMode ? inJSON.value : documentText();
      } catch (e) {
        if (!(e instanceof FieldProblem)) throw e;
        showFieldError(e.field, e.message);
        return;
      }
      summary.replaceChildren(el('p', { text: create ? 'Creating…' : 'Saving…' }));
      submit.disabled = true;
      let saved;
      try {
        saved = (await request(create ? 'POST' : 'PUT', create ? '/v1/jobs' : jobPath(id), body)).doc;
      } catch (e) {
        submit.disabled = false;
        if (stopped) return;
        if (e.status === 409 && !create) {
          summary.replaceChildren();
          conflict.replaceChildren(
            el('p', {}, el('strong', { text: 'Not saved: this job was changed by someone else since you opened it' }), ' (or deleted). Your edits are still in the form.'),
            el('p', { class: 'muted', text: e.message }),
            el('div', { class: 'actions' },
              el('button', { type: 'button', id: 'form-reload', text: 'Reload the job (drops your edits)', onclick: () => { flash = 'Reloaded: the form shows the job as it is now.'; initial = null; route(); } }),
              el('a', { href: '#/job/' + encodeURIComponent(id), text: 'See the job' })));
          conflict.hidden = false;
          $('form-reload').focus();
          return;
        }
        // A create outside the credential's prefix (403), or over an
        // existing job (409), is about the ID.
        const key = jsonMode ? 'json' : create && (e.status === 403 || e.status === 409) ? 'id' : fieldOfError(e.message);
        showFieldError(key, e.message);
        return;
      }
      flash = (create ? 'Created' : 'Saved') + ' (revision ' + saved.revision + ').';
      initial = null; // saved: nothing to lose
      location.hash = '#/job/' + encodeURIComponent(saved.id);
    }

    // showRevision says what saving an edit replaces: the revision read,
    // or (a revision removed in JSON mode) whatever is stored.
    function showRevision() {
      $('form-revision').textContent = revision
        ? ' at revision ' + revision + ': saving replaces only this revision.'
        : ' with no revision: saving replaces whatever is stored, even a change made since you opened it.';
    }

    // ---- JSON mode: the whole document as one text, sent as written

    let jsonMode = false;
    const jsonSet = el('fieldset', { id: 'form-json-set', hidden: true }, el('legend', { text: 'The job document (JSON)' }),
      field('json', 'Document', inJSON, 'As the API takes it (docs/jobs.md); saving sends it as written' +
        (create ? '.' : ', with the revision it names: remove it to replace whatever is stored.')));
    const toggle = el('button', { type: 'button', id: 'form-json', text: 'Edit as JSON' });
    toggle.addEventListener('click', () => {
      clearErrors();
      if (!jsonMode) {
        try {
          inJSON.value = documentText();
        } catch (e) {
          if (!(e instanceof FieldProblem)) throw e;
          showFieldError(e.field, e.message);
          return;
        }
      } else {
        try {
          const doc = JSON.parse(inJSON.value);
          // An edit keeps its ID (the server refuses another); the form
          // has no input for it, so it would be dropped unseen.
          if (!create && doc && doc.id !== id) throw new Error('"id" is ' + JSON.stringify(doc.id) + ', not the ID of the job edited, ' + JSON.stringify(id));
          fill(inJSON.value);
        } catch (e) {
          showFieldError('json', 'not a job document the form can show: ' + e.message);
          return;
        }
        showRevision();
        showWhen();
        showType();
        showPreview();
      }
      jsonMode = !jsonMode;
      for (const set of form.querySelectorAll('fieldset')) set.hidden = jsonMode !== (set === jsonSet);
      toggle.textContent = jsonMode ? 'Edit in the form' : 'Edit as JSON';
      (jsonMode ? inJSON : toggle).focus();
    });

    const submit = el('button', { type: 'submit', id: 'form-save', text: create ? 'Create job' : 'Save' });
    const form = el('form', { id: 'job-form', class: 'job-form', novalidate: true, onsubmit: save },
      el('fieldset', {}, el('legend', { text: 'Job' }),
        create ? field('id', 'ID', inID, me.prefix ? 'Your credential may create jobs whose ID starts with “' + me.prefix + '”.' : 'Letters of any script, digits, spaces, / and %; at most 200 bytes.')
          : el('p', {}, 'ID ', el('code', { id: 'f-id-fixed', text: id }), el('span', { class: 'muted', id: 'form-revision' }))),
      el('fieldset', {}, el('legend', { text: 'When' }),
        field('when', 'Runs', inWhen), whenBox.schedule, whenBox.run_at, zoneBox, zones, preview),
      el('fieldset', {}, el('legend', { text: 'Executor' }),
        field('executor.type', 'Type', inType), handlerBox, httpBox, shellBox),
      el('fieldset', {}, el('legend', { text: 'Attempts' }),
        el('div', { class: 'row' },
          field('retry.max_attempts', 'Max attempts', inAttempts, 'Including the first; default 1.'),
          field('retry.initial_backoff', 'Initial backoff', inBackoff, 'Before the first retry, doubled after each.'),
          field('retry.max_backoff', 'Max backoff', inMaxBackoff),
          field('timeout', 'Timeout', inTimeout, 'Per attempt: 30s, 2h, or none.'))),
      el('fieldset', {}, el('legend', { text: 'Policies' }),
        el('div', { class: 'row' },
          field('concurrency_policy', 'Concurrency', inConcurrency, 'When it fires while a run is pending or running.'),
          field('misfire_policy', 'Misfires', inMisfire, 'Times missed while no member owned it.')),
        field('paused', 'Paused (it does not fire; a trigger still runs it)', inPaused)),
      el('fieldset', {}, el('legend', { text: 'History' }),
        el('div', { class: 'row' },
          field('history.max_runs', 'Runs kept', inMaxRuns),
          field('history.max_age', 'Runs kept for', inMaxAge, 'After their scheduled time: 720h.'),
          field('delete_after', 'Delete a completed job after', inDeleteAfter, 'A one-off that ran, or a job past not_after or max_fires.'))),
      el('fieldset', {}, el('legend', { text: 'Other fields (JSON)' }),
        field('other', 'The rest of the document', inOther, 'Any other field of the job document, kept as written: ' + OTHER_FIELDS.join(', ') + '.')),
      jsonSet, summary, conflict,
      el('div', { class: 'actions' }, submit, toggle, el('a', { href: create ? '#/jobs' : '#/job/' + encodeURIComponent(id), id: 'form-cancel', text: 'Cancel' })));
    const note = el('p', { class: 'ok', id: 'form-note', 'aria-live': 'polite' });
    if (flash) { note.textContent = flash; flash = ''; }
    view.append(note, form);
    showWhen();
    showType();
    // Leaving the form with edits not saved asks first (route and
    // beforeunload): the document the form makes now, against the one it
    // made when filled (null: nothing to lose).
    const snapshot = () => {
      try {
        return jsonMode ? inJSON.value : documentText();
      } catch (e) {
        return '\u0000 not a document'; // an input that cannot be sent was edited
      }
    };
    leaveGuard = () => initial !== null && snapshot() !== initial;
    if (create) {
      initial = snapshot();
      showPreview();
    } else {
      form.hidden = true;
      request('GET', jobPath(id)).then(({ text }) => {
        if (stopped) return;
        fill(text);
        showRevision();
        form.hidden = false;
        initial = snapshot();
        showPreview();
      }, (e) => { if (!stopped) view.append(errorBox(e)); });
    }
    return () => { stopped = true; clearTimeout(previewTimer); leaveGuard = null; };
  }

  // runDuration returns a run's duration in seconds, from its first
  // attempt's start to its last attempt's end (to now while it runs), and
  // null for a run no attempt started.
  function runDuration(r) {
    const as = r.attempts || [];
    if (!as.length || !as[0].started_at) return null;
    const last = as[as.length - 1];
    const end = last.finished_at ? new Date(last.finished_at) : new Date();
    return Math.max(0, (end - new Date(as[0].started_at)) / 1000);
  }

  // runsDurationChart draws runs (newest first, as the API lists them)
  // as an SVG figure, oldest on the left: a bar per run as tall as its
  // duration, coloured by its status, a link to the run; a run that never
  // started is a short grey tick. Each bar carries data-run, data-status
  // and data-seconds.
  function runsDurationChart(runs) {
    const list = runs.slice().reverse();
    const W = 640, H = 120, L = 48, B = 6, T = 8;
    const step = (W - L) / Math.max(list.length, 1);
    const top = Math.max(1e-3, ...list.map((r) => runDuration(r) || 0));
    const y = (v) => T + (H - B - T) * (1 - v / top);
    const g = svg('g');
    list.forEach((r, i) => {
      const d = runDuration(r);
      const h = d === null ? 2 : Math.max(y(0) - y(d), 1);
      const a = svg('a', { href: '#/run/' + encodeURIComponent(r.run_id) },
        svg('rect', { class: 'bar st-' + r.status, x: (L + i * step + 1).toFixed(1), width: Math.max(step - 2, 1).toFixed(1), y: (y(0) - h).toFixed(1), height: h.toFixed(1),
          'data-run': r.run_id, 'data-status': r.status, 'data-seconds': d === null ? '' : d.toFixed(3) },
        svg('title', { text: fmtUTC(r.scheduled_at) + ': ' + r.status + (d === null ? ', not started' : ', ' + (fmtDuration(d) || '0 ms')) })));
      g.append(a);
    });
    const counts = {};
    for (const r of list) counts[r.status] = (counts[r.status] || 0) + 1;
    const summary = Object.entries(counts).map(([k, v]) => v + ' ' + k).join(', ');
    return el('figure', { class: 'chart', 'data-chart': 'Run durations' },
      svg('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': 'Durations of the last ' + list.length + ' runs, oldest first: ' + summary + '; the longest ' + (fmtDuration(top) || '0 ms') },
        svg('line', { class: 'axis', x1: L, x2: W, y1: y(0), y2: y(0) }),
        svg('text', { class: 'tick', x: L - 4, y: T + 8, 'text-anchor': 'end', text: fmtDuration(top) || '0 ms' }),
        svg('text', { class: 'tick', x: L - 4, y: y(0), 'text-anchor': 'end', text: '0' }),
        g),
      el('figcaption', { class: 'muted', text: 'Durations of the last ' + list.length + ' runs, oldest on the left (first attempt\u2019s start to last attempt\u2019s end), coloured by status: ' + summary + '. A bar opens its run.' }));
  }

  // failing lists the runs failed or dead across the fleet (GET /v1/runs),
  // a page at a time. The server lists them by partition and job, not by
  // time: each page is sorted newest first, and the note says so.
  // late lists the runs late across the fleet (GET /v1/runs/late), the
  // most late first, each with why: the answer to "why is it late?".
  function late(view) {
    const table = el('tbody', { id: 'late-runs' });
    const note = el('p', { class: 'muted', id: 'late-note', 'aria-live': 'polite' });
    view.append(heading('Late runs'),
      el('p', { class: 'muted', text: 'Runs waiting for a worker for more than 5 s, and running attempts whose heartbeats are late, on every member, with why. Updated every 5 s.' }),
      note,
      el('table', {},
        el('thead', {}, el('tr', {}, ['Job', 'Status', 'Late for', 'Scheduled (UTC)', 'Member', 'Why', 'Run'].map((h) => el('th', { scope: 'col', text: h })))),
        table));
    let stopped = false;
    async function load() {
      let list;
      try {
        list = await api('GET', '/v1/runs/late');
      } catch (e) {
        if (!stopped) { table.replaceChildren(); note.className = 'error'; note.textContent = 'Cannot list late runs: ' + e.message; }
        return;
      }
      if (stopped) return;
      const text = list.runs.length ? list.runs.length + ' late' + (list.truncated ? ' (a member had more than it lists: those late longest are shown)' : '') : 'Nothing is late.';
      if (note.textContent !== text) { note.className = list.runs.length ? 'warn' : 'ok'; note.textContent = text; }
      keepFocus(view, () => table.replaceChildren(...list.runs.map((r) => el('tr', { 'data-run': r.run_id, 'data-status': r.status },
        el('td', {}, el('a', { href: '#/job/' + encodeURIComponent(r.job_id), text: r.job_id })),
        el('td', { text: r.status }),
        el('td', { class: 'num', text: fmtDuration(between(r.since, list.now)) }),
        el('td', { text: fmtUTC(r.scheduled_at) }),
        el('td', { text: r.member }),
        el('td', { class: 'late-reason', text: r.reason }),
        el('td', {}, runLink(r.run_id, r.run_id))))));
    }
    load();
    const t = setInterval(load, 5000);
    return () => { stopped = true; clearInterval(t); };
  }

  function failing(view, arg) {
    const q = new URLSearchParams(arg || '');
    const prefix = el('input', { id: 'failing-prefix', value: q.get('prefix') || me.prefix || '', spellcheck: 'false' });
    const statusSel = el('select', { id: 'failing-status' },
      el('option', { value: 'dead,failed', text: 'dead or failed' }), el('option', { value: 'dead', text: 'dead' }), el('option', { value: 'failed', text: 'failed (retry due)' }));
    statusSel.value = q.get('status') || 'dead,failed';
    const since = el('select', { id: 'failing-since' },
      [['1h', 'last hour'], ['6h', 'last 6 hours'], ['24h', 'last 24 hours']].map(([v, t]) => el('option', { value: v, text: t })));
    since.value = q.get('since') || '24h';
    const table = el('tbody');
    const byJob = el('tbody');
    const pager = el('div', { class: 'actions' });
    const note = el('p', { class: 'muted', id: 'failing-note', 'aria-live': 'polite' });
    const cursors = ['']; // cursors of the pages seen, for Previous
    let page = 0;
    let stopped = false;

    // say changes the note only if its text changes: it is a live region,
    // and the 30 s refresh must not repeat it to a screen reader.
    function say(text, cls) {
      if (note.textContent === text && note.className === (cls || 'muted')) return;
      note.className = cls || 'muted';
      note.textContent = text;
    }
    async function load(refresh) {
      if (!refresh) say('Loading…');
      let list;
      try {
        list = await api('GET', '/v1/runs?limit=' + PAGE_SIZE + '&status=' + encodeURIComponent(statusSel.value) + '&since=' + encodeURIComponent(since.value) +
          '&prefix=' + encodeURIComponent(prefix.value) + (cursors[page] ? '&cursor=' + encodeURIComponent(cursors[page]) : ''));
      } catch (e) {
        if (stopped) return;
        table.replaceChildren();
        pager.replaceChildren();
        if (e.status === 404) say('This server has no fleet-wide list of failing runs. Open a job (Jobs, Last run column) to see its runs.');
        else say('Cannot list failing runs: ' + e.message, 'error');
        return;
      }
      if (stopped) return;
      cursors[page + 1] = list.next_cursor;
      const runs = list.runs.slice().sort((a, b) => (a.at < b.at ? 1 : (a.at > b.at ? -1 : 0)));
      keepFocus(view, () => {
        byJob.replaceChildren(...groupFailing(runs).map((g) => el('tr', { 'data-job': g.job },
          el('td', {}, el('a', { href: '#/job/' + encodeURIComponent(g.job), text: g.job })),
          el('td', { class: 'num', text: g.dead }),
          el('td', { class: 'num', text: g.failed }),
          el('td', { text: fmtUTC(g.latest.at) }),
          el('td', {}, g.latest.error ? el('span', { class: 'error', text: g.latest.error }) : el('span', { class: 'muted', text: 'no error recorded' })))));
        table.replaceChildren(...runs.map((r) => el('tr', { 'data-run': r.run_id, 'data-status': r.status },
          el('td', {}, el('a', { href: '#/job/' + encodeURIComponent(r.job_id), text: r.job_id })),
          el('td', { class: 'error', text: r.status }),
          el('td', { class: 'num', text: r.attempt }),
          el('td', { text: fmtUTC(r.at) }),
          el('td', {}, r.error ? el('span', { class: 'error', text: r.error }) : el('span', { class: 'muted', text: 'no error recorded' })),
          el('td', {}, el('a', { class: 'muted', href: '#/run/' + encodeURIComponent(r.run_id), text: r.run_id + (r.items ? ' (' + (r.items_succeeded || 0) + '/' + r.items + ' items)' : '') })))));
        if (!runs.length && page === 0 && !list.next_cursor) {
          say('No ' + statusSel.selectedOptions[0].text + ' runs in the ' + since.selectedOptions[0].text + (prefix.value ? ' under ' + prefix.value : '') + '.', 'ok');
        } else {
          say('Page ' + (page + 1) + ': ' + runs.length + ' run' + (runs.length === 1 ? '' : 's') +
            ', newest first within the page (the server pages by partition and job, not by time)' +
            (runs.length < PAGE_SIZE && list.next_cursor ? '; the server stops a page after reading 10 000 entries, Next page searches on' : '') + '. Refreshed every 30 s.');
        }
        pager.replaceChildren(
          el('button', { type: 'button', id: 'failing-prev', text: 'Previous page', disabled: page === 0, onclick: () => { page--; load(); } }),
          el('button', { type: 'button', id: 'failing-next', text: 'Next page', disabled: !list.next_cursor, onclick: () => { page++; load(); } }));
      });
    }
    const form = el('form', { class: 'inline', onsubmit: (ev) => {
      ev.preventDefault();
      keepQuery('failing', { prefix: prefix.value, status: statusSel.value === 'dead,failed' ? '' : statusSel.value, since: since.value === '24h' ? '' : since.value });
      cursors.length = 1; page = 0; load();
    } },
      el('label', { for: 'failing-prefix' }, 'Job ID prefix', prefix),
      el('label', { for: 'failing-status' }, 'Status', statusSel),
      el('label', { for: 'failing-since' }, 'Within the', since),
      el('button', { type: 'submit', id: 'failing-search', text: 'Search' }));
    view.append(heading('Failing runs'),
      el('p', { class: 'muted', text: 'Runs dead (no attempt left) or failed (a retry is due) across the fleet, with when they got that status and the start of their last error. Open a run for all of it.' }),
      form, note,
      el('h2', { text: 'By job' }),
      el('table', { id: 'failing-jobs' },
        el('thead', {}, el('tr', {}, ['Job', 'Dead', 'Failed', 'Latest (UTC)', 'Latest error (start)'].map((h) => el('th', { scope: 'col', text: h })))),
        byJob),
      el('h2', { text: 'Runs' }),
      el('table', { id: 'failing-table' },
        el('thead', {}, el('tr', {}, ['Job', 'Status', 'Attempts', 'At (UTC)', 'Error (start)', 'Run ID'].map((h) => el('th', { scope: 'col', text: h })))),
        table),
      pager);
    load();
    const t = setInterval(() => load(true), 30000);
    return () => { stopped = true; clearInterval(t); };
  }

  // groupFailing groups failing runs (newest first) by job: {job, dead,
  // failed, latest run}, the jobs with the most runs first, then the
  // most recent.
  function groupFailing(runs) {
    const by = new Map();
    for (const r of runs) {
      let g = by.get(r.job_id);
      if (!g) {
        g = { job: r.job_id, dead: 0, failed: 0, latest: r };
        by.set(r.job_id, g);
      }
      if (r.status === 'dead') g.dead++;
      else g.failed++;
      if (r.at > g.latest.at) g.latest = r;
    }
    return [...by.values()].sort((a, b) => (b.dead + b.failed) - (a.dead + a.failed) || (a.latest.at < b.latest.at ? 1 : (a.latest.at > b.latest.at ? -1 : 0)) || a.job.localeCompare(b.job));
  }

  // workers lists the live workers (GET /v1/cluster/workers): what each
  // serves, its labels, and a label-selector filter (the server's
  // ?selector=, the syntax of a job's placement.selector).
  function workers(view, arg) {
    const q = new URLSearchParams(arg || '');
    const selector = el('input', { id: 'workers-selector', value: q.get('selector') || '', spellcheck: 'false', size: '40', placeholder: 'pool=gpu,region in (eu-west,eu-central)' });
    const out = el('div', { id: 'workers-list' });
    const labelsText = (l) => Object.keys(l || {}).sort().map((k) => k + '=' + l[k]).join(', ');
    async function load() {
      const sel = selector.value.trim();
      try {
        const r = await api('GET', '/v1/cluster/workers' + (sel ? '?selector=' + encodeURIComponent(sel) : ''));
        const ws = r.workers || [];
        out.replaceChildren(ws.length
          ? el('table', { id: 'workers-table' },
            el('thead', {}, el('tr', {}, ['Worker', 'Credential', 'Serves', 'Labels', 'Active / concurrency', 'Registered', 'Updated', 'Orchestrator'].map((h) => el('th', { scope: 'col', text: h })))),
            el('tbody', {}, ws.map((w) => el('tr', {},
              el('td', { text: w.id }), el('td', { text: w.credential + (w.prefix ? ' (' + w.prefix + '*)' : '') }), el('td', { text: (w.executors || []).join(', ') }),
              el('td', { class: 'labels', text: labelsText(w.labels) }),
              el('td', { class: 'num', text: w.active + ' / ' + w.concurrency }), el('td', { text: fmtUTC(w.registered_at) }),
              el('td', { text: fmtUTC(w.last_contact) }), el('td', { text: w.orchestrator || '' })))))
          : el('p', { class: 'muted', text: sel ? 'No live worker matches ' + sel + '.' : 'No worker is registered.' }));
      } catch (e) {
        out.replaceChildren(el('p', { class: e.status === 400 ? 'error' : 'muted', text: e.status === 404 ? 'This server has no worker registry.' : 'Cannot list workers: ' + e.message }));
      }
    }
    const form = el('form', { class: 'inline', onsubmit: (ev) => {
      ev.preventDefault();
      keepQuery('workers', { selector: selector.value.trim() });
      load();
    } },
      el('label', { for: 'workers-selector' }, 'Labels matching', selector),
      el('button', { type: 'submit', id: 'workers-filter', text: 'Filter' }));
    view.append(heading('Workers'),
      el('p', { class: 'muted', text: 'The live workers: the executor types each serves, its labels (what jobs\' placement selectors match), the attempts it held when its registration was last written. Refreshed every 5 s.' }),
      form, out);
    load();
    const t = setInterval(load, 5000);
    return () => clearInterval(t);
  }

  const VIEWS = { overview, partitions, where, jobs, job, run, failing, late, workers, new: (view) => jobForm(view, null), edit: jobForm };
  const QUERY_VIEWS = new Set(['jobs', 'failing', 'workers']);

  async function route() {
    if (!token) { signOut(''); return; }
    if (!me && !(await signIn())) return;
    if (leaveGuard && location.hash !== shownHash && leaveGuard() &&
        !window.confirm('Leave this page? Your changes to the job are not saved.')) {
      history.replaceState(null, '', shownHash || '#/'); // stay, at the form's address
      return;
    }
    if (cleanup) { cleanup(); cleanup = null; }
    shownHash = location.hash;
    const h = location.hash.replace(/^#\/?/, '');
    const slash = h.indexOf('/');
    const name = slash < 0 ? h : h.slice(0, slash);
    let arg = slash < 0 ? '' : h.slice(slash + 1);
    // The jobs and failing views take a query string (prefix=a%26b), which
    // URLSearchParams decodes: decoding it first would split a prefix
    // holding '&' or '%'. The others take one ID, encoded whole.
    if (!QUERY_VIEWS.has(name)) {
      try { arg = decodeURIComponent(arg); } catch (e) { /* keep it raw */ }
    }
    const v = VIEWS[name] ? name : 'overview';
    for (const a of $('nav').querySelectorAll('a')) {
      if (a.getAttribute('href') === '#/' + (['job', 'run', 'new', 'edit'].includes(v) ? 'jobs' : v)) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    const view = $('view');
    view.replaceChildren();
    view.dataset.view = v;
    cleanup = VIEWS[v](view, arg);
    const h1 = view.querySelector('h1');
    if (h1) h1.focus();
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('signin-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      token = $('token').value.trim();
      $('token').value = '';
      sessionStorage.setItem(TOKEN_KEY, token);
      route();
    });
    $('signout').addEventListener('click', () => signOut('Signed out.'));
    window.addEventListener('hashchange', route);
    window.addEventListener('beforeunload', (ev) => {
      if (leaveGuard && leaveGuard()) { ev.preventDefault(); ev.returnValue = ''; }
    });
    route();
  });
})();
