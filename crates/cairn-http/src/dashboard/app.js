'use strict';
// Cairn's dashboard: plain DOM, no framework, no build step. Every value from the server is put
// into the page as text (never as HTML). Live updates are merged into what is shown (`morph`),
// so nodes that did not change stay as they are, with any text selected in them.
(() => {
  const base = location.pathname.endsWith('/') ? location.pathname : location.pathname + '/';
  const STATUSES = ['pending', 'running', 'suspended', 'paused', 'completed', 'failed', 'cancelled', 'continued'];
  const ENDED = new Set(['completed', 'failed', 'cancelled', 'continued']);
  const PAGE = 50;
  const view = document.getElementById('view');
  const liveBadge = document.getElementById('live');
  const tokenForm = document.getElementById('token-form');
  const offlineBanner = document.getElementById('offline');
  let stream = null;
  let offline = false;

  // ---- the API -------------------------------------------------------------------------------

  const token = () => sessionStorage.getItem('cairn-token') || '';

  function headers(extra) {
    const all = Object.assign({}, extra);
    if (token()) all.Authorization = 'Bearer ' + token();
    return all;
  }

  function askToken() {
    tokenForm.hidden = false;
    document.getElementById('token-input').focus();
  }

  tokenForm.addEventListener('submit', (event) => {
    event.preventDefault();
    sessionStorage.setItem('cairn-token', document.getElementById('token-input').value);
    tokenForm.hidden = true;
    route();
  });

  // Whether the server answers: while it does not, a banner says so and every action is off.
  function setOffline(down) {
    if (down === offline) return;
    offline = down;
    offlineBanner.hidden = !down;
    document.body.classList.toggle('offline', down);
    for (const button of document.querySelectorAll('.act')) allow(button, button.dataset.allowed !== 'false');
  }

  // Enables `button` when `allowed` and the server answers (an action's button: class `act`).
  function allow(button, allowed) {
    if (!button) return;
    button.dataset.allowed = String(allowed);
    button.disabled = !allowed || offline;
  }

  // The server did not answer a request: an Error saying so (code `unreachable`).
  function unreachable(error) {
    setOffline(true);
    const failure = new Error('the server did not answer (' + error.message + ')');
    failure.code = 'unreachable';
    return failure;
  }

  // Calls the API; answers its JSON or throws an Error with the API's code and message.
  async function api(method, path, body) {
    const init = { method, headers: headers(body === undefined ? {} : { 'Content-Type': 'application/json' }) };
    if (body !== undefined) init.body = typeof body === 'string' ? body : JSON.stringify(body);
    let response;
    try { response = await fetch(base + path, init); } catch (error) { throw unreachable(error); }
    setOffline(false);
    const text = await response.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (!response.ok) {
      if (response.status === 401) askToken();
      const detail = data && data.error ? data.error : { code: 'http_' + response.status, message: text };
      const error = new Error(detail.message);
      error.code = detail.code;
      error.status = response.status;
      throw error;
    }
    return data;
  }

  // Marks (User Timing) when a page view first shows its data: `cairn-runs-rendered` and
  // `cairn-run-rendered`, each once per view, for measuring the page in a browser.
  const marked = new Set();
  function markOnce(name) {
    if (marked.has(name)) return;
    marked.add(name);
    performance.mark(name);
  }

  function setLive(on) {
    liveBadge.className = 'live ' + (on ? 'on' : 'off');
    liveBadge.textContent = on ? 'live' : 'reconnecting';
  }

  // Stops what the page before followed (its stream or its polling); the controller that stops
  // the new page's.
  function takeOver() {
    if (stream) stream.abort();
    stream = new AbortController();
    return stream;
  }

  // Follows a server-sent event stream (read with fetch, so the token can go in a header) and
  // calls handlers[event](data) for each event; reconnects until another page replaces it.
  function watch(path, handlers) {
    const controller = takeOver();
    (async () => {
      while (!controller.signal.aborted) {
        try {
          const response = await fetch(base + path, {
            headers: headers({ Accept: 'text/event-stream' }),
            signal: controller.signal,
          });
          setOffline(false);
          if (!response.ok) {
            if (response.status === 401) askToken();
            let detail = { code: 'http_' + response.status, message: response.statusText };
            try { detail = (await response.json()).error || detail; } catch (_) { /* not JSON */ }
            if (handlers.error) handlers.error(detail);
            if (response.status === 404 || response.status === 400) return;
          } else {
            setLive(true);
            const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
            const last = { name: null, snapshot: null };
            let buffer = '';
            for (;;) {
              const { value, done } = await reader.read();
              if (done) break;
              buffer += value.replace(/\r\n?/g, '\n');
              let cut;
              while ((cut = buffer.indexOf('\n\n')) >= 0) {
                dispatch(buffer.slice(0, cut), handlers, last);
                buffer = buffer.slice(cut + 2);
              }
            }
          }
        } catch (error) {
          if (controller.signal.aborted) return;
          if (error instanceof TypeError) setOffline(true);
        }
        setLive(false);
        await new Promise((resolve) => setTimeout(resolve, 1500));
      }
    })();
  }

  function dispatch(frame, handlers, last) {
    let event = 'message';
    const data = [];
    for (const line of frame.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (!data.length) return;
    const value = JSON.parse(data.join('\n'));
    if (event === 'patch') {
      // What changed since the snapshot last sent (JSON Patch): apply it and show the result.
      if (last.snapshot === null) return;
      last.snapshot = applyPatch(last.snapshot, value);
      event = last.name;
    } else if (event !== 'error') {
      last.name = event;
      last.snapshot = value;
    }
    if (handlers[event]) handlers[event](event === 'error' ? value : last.snapshot);
  }

  // Applies the add, remove and replace operations of a JSON Patch (RFC 6902) to `doc`.
  function applyPatch(doc, ops) {
    for (const op of ops) {
      const tokens = op.path.split('/').slice(1).map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
      if (!tokens.length) { doc = op.value; continue; }
      const key = tokens.pop();
      const parent = tokens.reduce((node, token) => node[Array.isArray(node) ? Number(token) : token], doc);
      if (Array.isArray(parent)) {
        const i = Number(key);
        if (op.op === 'add') parent.splice(i, 0, op.value);
        else if (op.op === 'remove') parent.splice(i, 1);
        else parent[i] = op.value;
      } else if (op.op === 'remove') {
        delete parent[key];
      } else {
        parent[key] = op.value;
      }
    }
    return doc;
  }

  // ---- building the page ---------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    return fill(document.createElement(tag), attrs, children);
  }

  function svg(tag, attrs, ...children) {
    return fill(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs, children);
  }

  function fill(node, attrs, children) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  // What identifies a node among its siblings across renders.
  const keyOf = (node) => (node.nodeType === 1 ? node.getAttribute('data-key') || node.id || '' : '');
  const sameKind = (a, b) => a.nodeType === b.nodeType && a.nodeName === b.nodeName && keyOf(a) === keyOf(b);

  // Makes `node` look like `next` while keeping what did not change (and so a text selection
  // in it): attributes and text are set only where they differ, children merged by position
  // and key. Nodes merged so carry no listeners of their own: pages listen on their containers.
  function morph(node, next) {
    if (node.nodeType !== 1) {
      if (node.nodeValue !== next.nodeValue) node.nodeValue = next.nodeValue;
      return;
    }
    // A fold the reader opened or closed stays as they left it.
    const kept = (name) => name === 'open' && node.nodeName === 'DETAILS';
    for (const { name } of Array.from(node.attributes)) if (!next.hasAttribute(name) && !kept(name)) node.removeAttribute(name);
    for (const { name, value } of Array.from(next.attributes)) if (node.getAttribute(name) !== value && !kept(name)) node.setAttribute(name, value);
    morphChildren(node, Array.from(next.childNodes));
  }

  function morphChildren(parent, next) {
    for (let i = 0; i < next.length; i++) {
      const current = parent.childNodes[i];
      if (current && sameKind(current, next[i])) morph(current, next[i]);
      else parent.insertBefore(next[i], current || null);
    }
    while (parent.childNodes.length > next.length) parent.lastChild.remove();
  }

  // Shows `children` as the whole page (null, false and undefined are left out).
  function show(...children) {
    view.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  }

  // Shows `children` in the element `id`, merged into what it shows.
  function replace(id, ...children) {
    const node = document.getElementById(id);
    if (node) morphChildren(node, children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false)
      .map((c) => (c instanceof Node ? c : document.createTextNode(String(c)))));
  }

  const pad = (n, width) => String(n).padStart(width || 2, '0');

  // A time in the browser's zone, to the millisecond.
  function localTime(iso) {
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return iso || '';
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + pad(d.getHours()) + ':'
      + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + '.' + pad(d.getMilliseconds(), 3);
  }

  function relative(iso) {
    const ms = Date.now() - Date.parse(iso);
    if (Number.isNaN(ms)) return '';
    if (Math.abs(ms) < 1000) return 'now';
    return ms < 0 ? 'in ' + duration(-ms) : duration(ms) + ' ago';
  }

  // A time element: local time to the millisecond, the UTC time and how long ago in its title;
  // with `ago`, how long ago shown as well.
  function time(iso, ago) {
    if (!iso) return '';
    return el('time', { datetime: iso, title: iso + ' (' + relative(iso) + ')' },
      localTime(iso), ago ? el('span', { class: 'muted' }, ' (' + relative(iso) + ')') : null);
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return '';
    if (ms < 1000) return Math.round(ms) + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
    if (ms < 3600000) return (ms / 60000).toFixed(1) + ' min';
    if (ms < 86400000) return (ms / 3600000).toFixed(1) + ' h';
    return (ms / 86400000).toFixed(1) + ' d';
  }

  const statusBadge = (status) => el('span', { class: 'status status-' + status }, status);
  const runHref = (workflow, id) => '#/runs/' + encodeURIComponent(workflow) + '/' + encodeURIComponent(id);
  const runPath = (workflow, id) => 'v1/workflows/' + encodeURIComponent(workflow) + '/runs/' + encodeURIComponent(id);
  const json = (value) => JSON.stringify(value, null, 2);
  const number = (n) => Number(n).toLocaleString('en');

  // Runs an action the user asked for and says in #action-result how it went; its answer, or
  // null when it was refused.
  async function act(what, call) {
    const result = document.getElementById('action-result');
    result.className = '';
    result.textContent = what + '…';
    try {
      const answer = await call();
      result.className = 'ok';
      result.textContent = what + ': '
        + (answer && answer.outcome ? answer.outcome : answer && answer.created !== undefined ? 'started run ' + answer.id : 'done');
      return answer;
    } catch (error) {
      result.className = 'bad';
      result.textContent = what + ' refused: ' + error.message + (error.code ? ' (' + error.code + ')' : '');
      return null;
    }
  }

  // A table of `rows` under `headings` in a box that scrolls sideways when the table is wider
  // than the page (focusable, so the keyboard scrolls it too), or `emptyText` without rows. Its
  // name is `attrs['aria-label']`, or its headings.
  function table(headings, rows, emptyText, attrs) {
    if (!rows.length) return el('p', { class: 'empty' }, emptyText);
    const label = (attrs && attrs['aria-label']) || headings.join(', ');
    return el('div', { class: 'scroll', tabindex: 0, role: 'region', 'aria-label': label }, el('table', attrs || {},
      el('thead', {}, el('tr', {}, headings.map((h) => el('th', { scope: 'col' }, h)))), el('tbody', {}, rows)));
  }

  // ---- the runs page -------------------------------------------------------------------------

  // The filters a runs page's URL holds: workflow, status, id (a prefix), since and until (RFC
  // 3339), error (text), stranded, and `input.<field>` values.
  function filtersOf(params) {
    const filters = { input: [] };
    for (const name of ['workflow', 'status', 'id', 'since', 'until', 'error']) filters[name] = params.get(name) || '';
    filters.stranded = params.get('stranded') === 'true';
    for (const [name, value] of params) if (name.startsWith('input.')) filters.input.push([name.slice(6), value]);
    return filters;
  }

  // The API's list parameters for `filters`.
  function listQuery(filters) {
    const query = new URLSearchParams();
    if (filters.workflow) query.set('workflow', filters.workflow);
    if (filters.status) query.set('status', filters.status);
    if (filters.id) query.set('id_prefix', filters.id);
    if (filters.since) query.set('since', filters.since);
    if (filters.until) query.set('until', filters.until);
    if (filters.error) query.set('error', filters.error);
    if (filters.stranded) query.set('stranded', 'true');
    for (const [field, value] of filters.input) query.append('input.' + field, value);
    return query;
  }

  const filtered = (filters) => listQuery(filters).toString() !== '';

  // A local date-time field's value as RFC 3339 (UTC), and back.
  function fromLocal(value) {
    if (!value) return '';
    const at = new Date(value);
    return Number.isNaN(at.getTime()) ? '' : at.toISOString();
  }

  function toLocal(iso) {
    const text = iso ? localTime(iso) : '';
    return text ? text.replace(' ', 'T') : '';
  }

  function searchForm(filters) {
    const go = (event) => {
      if (event) event.preventDefault();
      const next = new URLSearchParams();
      const value = (id) => document.getElementById(id).value.trim();
      if (value('workflow-filter')) next.set('workflow', value('workflow-filter'));
      if (value('status-filter')) next.set('status', value('status-filter'));
      if (value('id-filter')) next.set('id', value('id-filter'));
      if (fromLocal(value('since-filter'))) next.set('since', fromLocal(value('since-filter')));
      if (fromLocal(value('until-filter'))) next.set('until', fromLocal(value('until-filter')));
      if (value('error-filter')) next.set('error', value('error-filter'));
      if (document.getElementById('stranded-filter').checked) next.set('stranded', 'true');
      for (const pair of value('input-filter').split(';')) {
        const at = pair.indexOf('=');
        if (at > 0) next.append('input.' + pair.slice(0, at).trim(), pair.slice(at + 1).trim());
      }
      location.hash = '#/' + (next.toString() ? '?' + next : '');
    };
    const field = (label, attrs) => el('label', {}, label, el('input', attrs));
    return el('form', { class: 'filters', id: 'search', role: 'search', onsubmit: go },
      el('label', {}, 'Workflow', el('select', { id: 'workflow-filter', onchange: go },
        el('option', { value: '' }, 'all'),
        filters.workflow ? el('option', { value: filters.workflow, selected: true }, filters.workflow) : null)),
      el('label', {}, 'Status', el('select', { id: 'status-filter', onchange: go },
        el('option', { value: '' }, 'all'),
        STATUSES.map((s) => el('option', { value: s, selected: s === filters.status }, s)))),
      field('Run id or its start', { id: 'id-filter', value: filters.id, size: 16, placeholder: 'order-17' }),
      field('Input (field=value; …)', { id: 'input-filter', size: 18, placeholder: 'customer=42; city=Oslo',
        value: filters.input.map(([k, v]) => k + '=' + v).join('; ') }),
      field('Created from', { id: 'since-filter', type: 'datetime-local', step: '0.001', value: toLocal(filters.since) }),
      field('Created before', { id: 'until-filter', type: 'datetime-local', step: '0.001', value: toLocal(filters.until) }),
      field('Error holds', { id: 'error-filter', value: filters.error, size: 14, placeholder: 'timeout' }),
      el('label', { class: 'check' }, el('input', { id: 'stranded-filter', type: 'checkbox', checked: filters.stranded }),
        'Stranded only'),
      el('button', { type: 'submit', id: 'search-button', class: 'primary' }, 'Search'),
      filtered(filters) ? el('a', { href: '#/', id: 'clear-filters' }, 'Clear') : null);
  }

  // Asks, in the page, whether to go on with `what` (a sentence), with the buttons `yes` and
  // "Keep it"; `then` runs on yes, given the reason typed when `reason` asks for one (or
  // undefined). The question replaces any other.
  function confirmInPage(container, what, yes, then, reason) {
    const box = document.getElementById(container);
    const close = () => box.replaceChildren();
    const why = () => { const field = document.getElementById('confirm-reason'); return field ? field.value.trim() || undefined : undefined; };
    box.replaceChildren(el('div', { class: 'confirm', role: 'alertdialog', 'aria-label': what },
      el('span', {}, what + ' '),
      reason ? el('label', {}, 'Reason (optional) ', el('input', { id: 'confirm-reason', size: 24, maxlength: 1000 })) : null, ' ',
      el('button', { id: 'confirm-yes', class: 'danger act', onclick: () => { const given = why(); close(); then(given); } }, yes),
      ' ', el('button', { id: 'confirm-no', onclick: close }, 'Keep it')));
    allow(document.getElementById('confirm-yes'), true);
    document.getElementById('confirm-no').focus();
  }

  // JSON text from a field: its value, or an Error saying where it is not JSON.
  function jsonField(id) {
    const text = document.getElementById(id).value.trim();
    try { return text ? JSON.parse(text) : null; } catch (error) {
      throw new Error('the ' + id.replace(/-/g, ' ') + ' is not JSON: ' + error.message);
    }
  }

  // Puts the input of `workflow`'s newest run into the start form, unless it was edited.
  async function prefill(workflow) {
    const input = document.getElementById('start-input');
    if (!input || input.dataset.edited === 'true') return;
    try {
      const page = await api('GET', 'v1/workflows/' + encodeURIComponent(workflow) + '/runs?limit=1');
      const newest = page.runs[0];
      const detail = newest ? await api('GET', runPath(workflow, newest.id)) : null;
      if (input.dataset.edited !== 'true' && document.getElementById('start-workflow').value === workflow) {
        input.value = detail ? json(detail.input) : '';
        input.placeholder = detail ? '' : 'JSON (empty: null): ' + workflow + ' has no runs yet';
      }
    } catch (_) { /* the form still works by hand */ }
  }

  function startPanel(workflow) {
    const start = async (event) => {
      event.preventDefault();
      const name = document.getElementById('start-workflow').value;
      const id = document.getElementById('start-id').value.trim();
      let input;
      try { input = jsonField('start-input'); } catch (error) { return act('start', () => Promise.reject(error)); }
      const body = id ? { id, input } : { input };
      const answer = await act('start ' + name, () => api('POST', 'v1/workflows/' + encodeURIComponent(name) + '/runs', body));
      if (answer) location.hash = runHref(name, answer.id);
      return answer;
    };
    return el('details', { id: 'start-panel', class: 'panel' }, el('summary', {}, 'Start a run'),
      el('form', { id: 'start-form', class: 'filters', onsubmit: start },
        el('label', {}, 'Workflow', el('select', { id: 'start-workflow', onchange: (e) => {
          document.getElementById('start-input').dataset.edited = 'false';
          prefill(e.target.value);
        } }, workflow ? el('option', { value: workflow }, workflow) : null)),
        el('label', {}, 'Run id (optional)', el('input', { id: 'start-id', size: 16, placeholder: 'a new id' })),
        el('label', { class: 'wide' }, 'Input (JSON; the newest run\'s when there is one)',
          el('textarea', { id: 'start-input', rows: 3, oninput: (e) => { e.target.dataset.edited = 'true'; } })),
        el('button', { id: 'start-button', class: 'primary act', type: 'submit' }, 'Start')));
  }

  // The publish form; `published` is called with each answer.
  function publishPanel(published) {
    const publish = async (event) => {
      event.preventDefault();
      const topic = document.getElementById('publish-topic').value.trim();
      const id = document.getElementById('publish-id').value.trim();
      let payload;
      try { payload = jsonField('publish-payload'); } catch (error) { return act('publish', () => Promise.reject(error)); }
      const body = id ? { id, payload } : { payload };
      const answer = await act('publish ' + topic, () => api('POST', 'v1/events/' + encodeURIComponent(topic), body));
      if (answer) {
        const started = answer.runs.concat(answer.already_started);
        replace('action-result', 'published event ', el('span', { class: 'mono' }, answer.id), ' to ', answer.topic, ': ',
          started.length ? started.map((r, i) => [i ? ', ' : '', el('a', { class: 'mono published-run', href: runHref(r.workflow, r.id) }, r.id)])
            : 'no workflow subscribes to it', answer.already_started.length ? ' (started before)' : '');
        if (published) published(answer);
      }
      return answer;
    };
    return el('details', { id: 'publish-panel', class: 'panel' }, el('summary', {}, 'Publish an event'),
      el('form', { id: 'publish-form', class: 'filters', onsubmit: publish },
        el('label', {}, 'Topic', el('input', { id: 'publish-topic', size: 16, placeholder: 'user.signup', required: true })),
        el('label', {}, 'Event id (optional)', el('input', { id: 'publish-id', size: 16, placeholder: 'a new id' })),
        el('label', { class: 'wide' }, 'Payload (JSON)', el('textarea', { id: 'publish-payload', rows: 3 })),
        el('button', { id: 'publish-button', class: 'primary act', type: 'submit' }, 'Publish')));
  }

  // The API's bulk filter for `filters` (input fields nest by their dots; a value is JSON when
  // it is JSON, as the list reads it).
  function bulkFilter(filters) {
    const filter = { stranded: filters.stranded };
    for (const [name, field] of [['workflow', 'workflow'], ['status', 'status'], ['id', 'idPrefix'], ['since', 'since'],
      ['until', 'until'], ['error', 'error']]) if (filters[name]) filter[field] = filters[name];
    if (filters.input.length) {
      filter.input = {};
      for (const [path, text] of filters.input) {
        let value;
        try { value = JSON.parse(text); } catch (_) { value = text; }
        const keys = path.split('.');
        const last = keys.pop();
        const slot = keys.reduce((node, key) => (node[key] = node[key] || {}), filter.input);
        slot[last] = value;
      }
    }
    return filter;
  }

  function bulkPanel(filters) {
    const limit = 100;
    const run = (action) => {
      const verb = { cancel: 'Cancel', pause: 'Pause', resume: 'Resume' }[action];
      confirmInPage('bulk-confirm', verb + ' up to ' + limit + ' of the runs this search selects, newest first?',
        verb + ' them', async () => {
          const answer = await act(action + ' matching runs',
            () => api('POST', 'v1/runs/bulk', { action, filter: bulkFilter(filters), limit }));
          if (!answer) return;
          const refused = answer.runs.filter((r) => r.error);
          replace('action-result', el('span', { class: 'ok', id: 'bulk-result' },
            action + ': ' + answer.done + ' done, ' + answer.refused + ' refused' + (answer.more ? '; more runs match: do it again' : '') + '.'),
          refused.length ? el('ul', { id: 'bulk-refused' }, refused.slice(0, 20).map((r) => el('li', {},
            el('a', { class: 'mono', href: runHref(r.workflow, r.run) }, r.run), ': ', r.error.message, ' (', r.error.code, ')'))) : null);
        });
    };
    return el('div', { id: 'bulk', class: 'bulk' },
      el('span', { class: 'muted' }, 'The runs this search selects: '),
      el('button', { id: 'bulk-cancel', class: 'danger act', onclick: () => run('cancel') }, 'Cancel…'), ' ',
      el('button', { id: 'bulk-pause', class: 'act', onclick: () => run('pause') }, 'Pause…'), ' ',
      el('button', { id: 'bulk-resume', class: 'act', onclick: () => run('resume') }, 'Resume…'),
      el('div', { id: 'bulk-confirm' }));
  }

  function runsPage(params) {
    const filters = filtersOf(params);
    const query = listQuery(filters);
    // The live first page, the rows that fell out of it since older pages were read, and
    // the older pages, read from `cursor` on.
    const state = { live: [], fell: new Map(), older: [], cursor: null, frozen: false, loading: false };
    show(
      el('h1', {}, 'Runs'),
      startPanel(filters.workflow),
      publishPanel(),
      searchForm(filters),
      el('p', { id: 'runs-count', class: 'muted', role: 'status' }),
      filtered(filters) ? bulkPanel(filters) : null,
      el('p', { id: 'action-result', role: 'status' }),
      el('div', { id: 'runs' }, el('p', { class: 'empty' }, 'Loading…')),
      el('p', { class: 'more' }, el('button', { id: 'more', class: 'act', hidden: true }, 'Older runs')),
      el('h2', {}, 'Workflows'), el('div', { id: 'workflows' }),
      el('h2', {}, 'Workers'), el('div', { id: 'workers' }),
      el('h2', {}, 'Stranded'), el('div', { id: 'stranded' }));
    const more = document.getElementById('more');
    const redraw = () => renderRunRows(state, filters);
    const loadOlder = async () => {
      if (state.loading || !state.cursor || offline) return;
      state.loading = true;
      state.frozen = true;
      allow(more, false);
      try {
        const page = new URLSearchParams(query);
        page.set('limit', String(PAGE));
        page.set('cursor', state.cursor);
        const answer = await api('GET', 'v1/runs?' + page);
        const known = new Set(state.older.map((r) => r.id));
        state.older.push(...answer.runs.filter((r) => !known.has(r.id)));
        state.cursor = answer.next_cursor || null;
      } catch (error) {
        replace('runs-count', el('span', { class: 'error-text' }, 'Older runs: ' + error.message + ' (' + error.code + ')'));
      }
      state.loading = false;
      redraw();
    };
    more.addEventListener('click', loadOlder);
    // Scrolling to the end reads the next page (the button stays for the keyboard).
    if ('IntersectionObserver' in window) {
      new IntersectionObserver((entries) => {
        if (entries.some((e) => e.isIntersecting) && !more.hidden) loadOlder();
      }, { rootMargin: '400px' }).observe(more);
    }
    // At most one count every 3 s; a change meanwhile is counted when that time is up.
    let counting = null;
    let again = false;
    const count = () => {
      if (counting) { again = true; return; }
      counting = setTimeout(() => {
        counting = null;
        if (again) { again = false; count(); }
      }, 3000);
      api('GET', 'v1/run-count?' + query).then((answer) => {
        const n = number(answer.count) + (answer.capped ? '+' : '');
        const runs = answer.count === 1 && !answer.capped ? ' run' : ' runs';
        replace('runs-count', n + (filtered(filters) ? ' matching' : '') + runs);
      }).catch(() => {});
    };
    const live = new URLSearchParams(query);
    live.set('limit', String(PAGE));
    watch('v1/live/runs?' + live, {
      runs: (snapshot) => {
        const ids = new Set(snapshot.runs.runs.map((r) => r.id));
        // Rows that fell out of the live page stay shown until older pages reach them.
        if (state.frozen) for (const run of state.live) if (!ids.has(run.id)) state.fell.set(run.id, run);
        for (const id of ids) state.fell.delete(id);
        state.live = snapshot.runs.runs;
        if (!state.frozen) state.cursor = snapshot.runs.next_cursor || null;
        renderRunsSnapshot(snapshot, filters);
        redraw();
        count();
      },
      error: (error) => replace('runs', el('p', { class: 'error-text' }, error.message + ' (' + error.code + ')')),
    });
  }

  function renderRunRows(state, filters) {
    const seen = new Set();
    const key = (run) => run.created_at + ' ' + run.id;
    const fell = Array.from(state.fell.values()).sort((a, b) => (key(a) < key(b) ? 1 : -1));
    const rows = [];
    for (const run of [...state.live, ...fell, ...state.older]) {
      if (seen.has(run.id)) continue;
      seen.add(run.id);
      rows.push(runRow(run));
    }
    const more = document.getElementById('more');
    more.hidden = !state.cursor;
    allow(more, !state.loading);
    more.textContent = state.loading ? 'Reading older runs…' : 'Older runs';
    const empty = filtered(filters)
      ? el('span', {}, 'No runs match these filters. ', el('a', { href: '#/' }, 'Clear them'), '.')
      : el('span', {}, 'No runs yet. Start one with ', el('code', {}, 'cairn start <workflow>'), ', ',
        el('code', {}, 'POST /v1/workflows/{name}/runs'), ', or a client of the workflows below.');
    replace('runs', table(['Run', 'Workflow', 'Version', 'Status', 'Created', 'Updated', 'Steps', 'Note'], rows, empty,
      { id: 'runs-table' }));
    markOnce('cairn-runs-rendered');
  }

  function runRow(run) {
    const note = run.stranded_reason ? 'stranded: ' + run.stranded_reason
      : run.status === 'paused' ? (run.error || 'paused')
        : run.error ? run.error : run.suspend_reason ? run.suspend_reason + (run.wake_at ? ' until ' + localTime(run.wake_at) : '') : '';
    const bad = run.stranded || run.status === 'failed';
    return el('tr', { class: 'run', 'data-key': run.id, 'data-id': run.id, 'data-status': run.status },
      el('td', { class: 'mono id' }, el('a', { href: runHref(run.workflow, run.id) }, run.id)),
      el('td', {}, run.workflow), el('td', { class: 'num' }, run.version),
      el('td', {}, statusBadge(run.status)), el('td', {}, time(run.created_at)), el('td', {}, time(run.updated_at)),
      el('td', { class: 'num' }, run.steps), el('td', { class: bad ? 'error-text' : 'muted' }, note));
  }

  function renderRunsSnapshot(snapshot, filters) {
    const names = snapshot.workflows.workflows.map((w) => w.name);
    if (filters.workflow && !names.includes(filters.workflow)) names.push(filters.workflow);
    replace('workflow-filter', el('option', { value: '' }, 'all'),
      names.map((name) => el('option', { value: name, selected: name === filters.workflow }, name)));
    const chosen = document.getElementById('start-workflow');
    if (chosen) {
      const was = chosen.value;
      replace('start-workflow', names.map((name) => el('option', { value: name, 'data-key': name }, name)));
      if (was && names.includes(was)) chosen.value = was;
      if (!was && chosen.value) prefill(chosen.value);
    }
    replace('workflows', table(['Workflow', 'Versions', ...STATUSES, 'Total'], snapshot.workflows.workflows.map((w) =>
      el('tr', { 'data-key': w.name, 'data-workflow': w.name },
        el('td', {}, el('a', { href: '#/?workflow=' + encodeURIComponent(w.name) }, w.name)),
        el('td', { class: 'num' }, (w.versions || []).join(', ')),
        STATUSES.map((s) => el('td', { class: 'num', 'data-status': s }, w.runs[s] || '')),
        el('td', { class: 'num' }, w.total))),
      'No workflows yet: none has runs, and no worker has said what it serves.'));
    replace('workers', table(['Worker', 'Host', 'PID', 'Started', 'Last seen', 'Serves'], snapshot.workers.workers.map((w) =>
      el('tr', { class: 'worker', 'data-key': w.id }, el('td', { class: 'mono id' }, w.id), el('td', {}, w.host),
        el('td', { class: 'num' }, w.pid), el('td', {}, time(w.started_at)), el('td', {}, time(w.last_seen)),
        el('td', {}, w.serves.map((k) => k.workflow + ' v' + k.version).join(', ')))), 'No live worker.'));
    replace('stranded', table(['Workflow', 'Version', 'Runs', 'Why'], snapshot.workers.stranded.map((s) =>
      el('tr', { class: 'stranded' }, el('td', {}, el('a', { href: '#/?stranded=true&workflow=' + encodeURIComponent(s.workflow) }, s.workflow)),
        el('td', { class: 'num' }, s.version), el('td', { class: 'num' }, s.runs), el('td', {}, s.reason))),
      'No stranded runs.'));
  }

  // ---- one run -------------------------------------------------------------------------------

  const RESTART_CHOICES = 500;

  // The events the shown run's open waits ask for.
  let openWaits = [];

  // Warns, as a signal's name is typed, when no open wait of the run asks for it (it is kept
  // for a later wait, which may never come).
  function warnSignal() {
    const field = document.getElementById('signal-name');
    const warning = document.getElementById('signal-warning');
    if (!field || !warning) return;
    const name = field.value.trim();
    warning.hidden = !name || openWaits.includes(name);
    warning.textContent = 'No wait of this run asks for ' + JSON.stringify(name) + ' now'
      + (openWaits.length ? ' (it waits for ' + openWaits.map((e) => JSON.stringify(e)).join(', ') + ')' : '')
      + ': the signal will be kept for a later wait, if one comes.';
  }

  function runPage(workflow, id) {
    openWaits = [];
    zoom = 1;
    graphAll = false;
    lastRun = null;
    const path = runPath(workflow, id);
    const sendSignal = (event) => {
      event.preventDefault();
      const name = document.getElementById('signal-name').value.trim();
      const text = document.getElementById('signal-payload').value.trim();
      if (!name) return act('signal', () => Promise.reject(new Error('give the signal a name')));
      try { JSON.parse(text || 'null'); } catch (error) {
        return act('signal', () => Promise.reject(new Error('the payload is not JSON: ' + error.message)));
      }
      return act('signal ' + name, () => api('POST', path + '/signals/' + encodeURIComponent(name), text || 'null'));
    };
    const restart = async (reason) => {
      const from = document.getElementById('restart-step').value;
      const body = reason ? { fromStep: from, reason } : { fromStep: from };
      const answer = await act('restart', () => api('POST', path + '/restart', body));
      if (answer) location.hash = runHref(workflow, answer.run);
    };
    show(
      el('p', {}, el('a', { href: '#/?workflow=' + encodeURIComponent(workflow) }, '← ' + workflow + ' runs')),
      el('h1', {}, workflow, ' / ', el('span', { class: 'mono' }, id), ' ', el('span', { id: 'run-status' })),
      el('div', { id: 'run-missing' }),
      el('div', { id: 'run-body' },
        el('dl', { class: 'facts', id: 'facts' }),
        el('h2', {}, 'Actions'),
        el('div', { class: 'actions' },
          el('button', { id: 'cancel', class: 'danger act', onclick: () => confirmInPage('confirm', 'Cancel this run? Its children are cancelled too.',
            'Cancel the run', (reason) => act('cancel', () => api('DELETE', path + (reason ? '?reason=' + encodeURIComponent(reason) : ''))),
            true) }, 'Cancel…'),
          el('button', { id: 'pause', class: 'act', onclick: () => confirmInPage('confirm', 'Pause this run? A running run stops at its next step.',
            'Pause the run', (reason) => act('pause', () => api('POST', path + '/pause' + (reason ? '?reason=' + encodeURIComponent(reason) : ''))),
            true) }, 'Pause…'),
          el('button', { id: 'resume', class: 'act', onclick: () => act('resume', () => api('POST', path + '/resume')) }, 'Resume'),
          el('fieldset', {}, el('label', {}, 'Restart from ', el('select', { id: 'restart-step' })),
            el('button', { id: 'restart', class: 'act', onclick: () => confirmInPage('confirm',
              'Start a new run from step ' + document.getElementById('restart-step').value + '?', 'Restart', restart, true) }, 'Restart…')),
          el('form', { id: 'signal-form', onsubmit: sendSignal },
            el('fieldset', {},
              el('label', {}, 'Signal ', el('input', { id: 'signal-name', placeholder: 'event', size: 12, oninput: warnSignal })),
              el('label', {}, 'Payload ', el('textarea', { id: 'signal-payload', placeholder: 'JSON (empty: null)' })),
              el('button', { id: 'send-signal', class: 'act', type: 'submit' }, 'Send')))),
        el('p', { id: 'signal-warning', class: 'notice', hidden: true }),
        el('div', { id: 'confirm' }),
        el('p', { id: 'action-result', role: 'status' }),
        el('div', { class: 'panels' },
          el('div', {}, el('h2', {}, 'Input'), el('div', { id: 'input-view' })),
          el('div', {}, el('h2', {}, 'Output'), el('div', { id: 'outcome' }))),
        el('h2', {}, 'Scopes'), el('div', { id: 'graph' }),
        el('h2', {}, 'Durable values'), el('div', { id: 'vars' }),
        el('h2', {}, 'Timeline'),
        el('div', { class: 'legend' },
          el('span', {}, el('i', { class: 'attempt' }), 'step attempt'),
          el('span', {}, el('i', { class: 'failed' }), 'failed attempt'),
          el('span', {}, el('i', { class: 'retry-wait' }), 'waiting to retry'),
          el('span', {}, el('i', { class: 'sleep' }), 'sleep'),
          el('span', {}, el('i', { class: 'wait' }), 'wait for a signal'),
          el('span', {}, el('i', { class: 'abandoned' }), 'ended with the run')),
        el('div', { id: 'timeline' }),
        el('h2', {}, 'Steps'), el('div', { id: 'steps' }),
        el('h2', {}, 'Pending signals'), el('div', { id: 'pending-signals' }),
        el('h2', {}, 'Consumed signals'), el('div', { id: 'consumed-signals' }),
        el('h2', {}, 'Journal'), el('div', { id: 'journal' })));
    for (const button of view.querySelectorAll('.act')) allow(button, false);
    watch(path + '/live', {
      run: (snapshot) => renderRun(snapshot, workflow),
      error: (error) => (error.code === 'run_not_found' ? missingRun(workflow, id)
        : replace('run-missing', el('p', { class: 'error-text', id: 'run-error' }, error.message + ' (' + error.code + ')'))),
    });
  }

  // Says that the page's run does not exist, or that it is a run of another workflow.
  async function missingRun(workflow, id) {
    document.getElementById('run-body').hidden = true;
    replace('run-status', statusBadge('missing'));
    let elsewhere = null;
    try { elsewhere = await api('GET', 'v1/runs/' + encodeURIComponent(id)); } catch (_) { elsewhere = null; }
    replace('run-missing', el('p', { class: 'notice', id: 'run-error' },
      elsewhere && elsewhere.workflow !== workflow
        ? ['Run ', el('span', { class: 'mono' }, id), ' is not a run of ', workflow, ': it is a run of ',
          el('a', { id: 'run-elsewhere', href: runHref(elsewhere.workflow, id) }, elsewhere.workflow), '.']
        : ['There is no run ', el('span', { class: 'mono' }, id), ' of ', workflow,
          ' (it may have been pruned). ', el('a', { href: '#/?id=' + encodeURIComponent(id) }, 'Search for runs whose id starts so'), '.']));
  }

  function renderRun(snapshot, workflow) {
    lastRun = { snapshot, workflow };
    const run = snapshot.run;
    replace('run-status', statusBadge(run.status));
    const fact = (name, ...value) => [el('dt', {}, name), el('dd', {}, ...value)];
    const restarts = run.restarts || [];
    const children = run.children || [];
    const link = (attrs, target) => el('a', Object.assign({ class: 'mono', href: runHref(workflow, target) }, attrs), target);
    const first = snapshot.steps.journal[0];
    const started = first && first.event.started;
    replace('facts',
      fact('status', statusBadge(run.status), run.pause_requested ? ' (pause requested)' : '',
        run.cancel_requested && !ENDED.has(run.status) ? ' (cancel requested)' : ''),
      fact('version', String(run.version)),
      fact('created', time(run.created_at, true)),
      fact('updated', time(run.updated_at, true)),
      run.completed_at ? fact('ended', time(run.completed_at, true), ' after ',
        duration(Date.parse(run.completed_at) - Date.parse(run.created_at))) : [],
      run.suspend_reason ? fact('suspended', run.suspend_reason, run.wake_at ? [' until ', time(run.wake_at, true)] : '') : [],
      run.status === 'paused' ? fact('paused', run.error || 'paused') : [],
      run.deadline ? fact('deadline', time(run.deadline, true)) : [],
      run.delete_after ? fact('deleted after', time(run.delete_after, true)) : [],
      run.idempotency_key ? fact('idempotency key', el('span', { class: 'mono' }, run.idempotency_key)) : [],
      ENDED.has(run.status) ? [] : (() => { const waits = waitingFor(snapshot.steps.steps, run);
        return waits.length ? fact('waiting for', el('span', { id: 'waiting-for' }, waits)) : []; })(),
      run.fairness_key ? fact('fairness key', el('span', { class: 'mono' }, run.fairness_key)) : [],
      run.concurrency_key !== null && run.concurrency_key !== undefined
        ? fact('concurrency key', el('span', { class: 'mono' }, run.concurrency_key || '(none: one group)')) : [],
      run.debounce_key ? fact('debounce key', el('span', { class: 'mono' }, run.debounce_key)) : [],
      run.priority ? fact('priority', String(run.priority)) : [],
      run.stranded_reason ? fact('stranded', el('span', { class: 'error-text' }, run.stranded_reason)) : [],
      run.parent ? fact('parent', el('a', { id: 'parent', class: 'mono', href: '#/runs/-/' + encodeURIComponent(run.parent) }, run.parent)) : [],
      children.length ? fact('children', children.flatMap((c, i) =>
        [i ? ', ' : '', el('a', { class: 'mono child-link', href: '#/runs/-/' + encodeURIComponent(c) }, c)])) : [],
      run.restarted_from ? fact('restarted from', link({ id: 'restarted-from' }, run.restarted_from)) : [],
      started && started.reason ? fact('started because', el('span', { id: 'start-reason' }, started.reason)) : [],
      restarts.length ? fact('restarts', restarts.flatMap((r, i) => [i ? ', ' : '', link({ class: 'mono restart-link' }, r)])) : [],
      run.continued_from ? fact('continues', link({ id: 'continued-from' }, run.continued_from)) : [],
      run.continued_as ? fact('continued as', link({ id: 'continued-as' }, run.continued_as)) : [],
      fact('steps journaled', String(run.steps)),
      run.recoveries ? fact('recoveries', String(run.recoveries)) : []);
    const ended = ENDED.has(run.status);
    allow(document.getElementById('cancel'), !ended);
    allow(document.getElementById('pause'), !ended && run.status !== 'paused');
    allow(document.getElementById('resume'), run.status === 'paused');
    allow(document.getElementById('restart'), ended && snapshot.steps.steps.length > 0);
    allow(document.getElementById('send-signal'), !ended);
    const restartStep = document.getElementById('restart-step');
    const chosen = restartStep.value;
    // The steps to restart from: every one, up to RESTART_CHOICES (then the first ones and the
    // last one: a longer list costs more to draw than it helps).
    const steps = snapshot.steps.steps;
    const choices = steps.length <= RESTART_CHOICES ? steps : steps.slice(0, RESTART_CHOICES - 1).concat(steps.slice(-1));
    replace('restart-step', choices.map((step) =>
      el('option', { value: step.path, 'data-key': step.path, selected: step.path === chosen }, step.path)));
    replace('input-view', jsonView('input', run.input));
    // A cancel's reason, unless it is the one a cancel without a reason journals.
    const why = run.error && run.error !== 'cancelled' ? ': ' + run.error : '';
    replace('outcome',
      run.status === 'paused' ? el('p', { class: 'muted', id: 'output' }, 'Paused: ' + (run.error || 'by request') + '.')
        : run.status === 'cancelled' ? el('p', { class: 'muted', id: 'output' }, 'Cancelled' + why + '.')
          : run.cancel_requested ? el('p', { class: 'muted', id: 'output' }, 'Cancel requested' + why + '; its worker stops it.')
          : run.error ? el('pre', { id: 'error', class: 'error-text', tabindex: 0 }, run.error) : null,
      run.status === 'completed' ? jsonView('output', run.output)
        : run.error || run.status === 'paused' || run.status === 'cancelled' ? null
          : el('p', { class: 'muted', id: 'output' }, ended ? 'Ended without an output.' : 'Not finished.'));
    drawTimeline(snapshot.steps.steps, run);
    stepsTable(snapshot.steps.steps);
    replace('graph', runGraph(snapshot.steps.steps, run, workflow));
    replace('vars', durableValues(snapshot.steps.journal));
    openWaits = snapshot.steps.steps.filter((s) => s.kind === 'wait' && !s.ended_at).map((s) => s.event);
    warnSignal();
    markOnce('cairn-run-rendered');
    const pending = snapshot.signals.signals.filter((s) => s.consumed_seq === null || s.consumed_seq === undefined);
    const consumed = snapshot.signals.signals.filter((s) => !(s.consumed_seq === null || s.consumed_seq === undefined));
    const signalRow = (s) => el('tr', { class: 'signal', 'data-key': String(s.id), 'data-name': s.name },
      el('td', { class: 'num' }, s.id), el('td', {}, s.name), el('td', { class: 'mono' }, JSON.stringify(s.payload)),
      el('td', {}, time(s.sent_at)), el('td', { class: 'num' }, s.consumed_seq === null ? '' : s.consumed_seq));
    replace('pending-signals', table(['#', 'Name', 'Payload', 'Sent', 'Consumed'], pending.map(signalRow), 'None.', { 'aria-label': 'Pending signals' }));
    replace('consumed-signals', table(['#', 'Name', 'Payload', 'Sent', 'Journal seq'], consumed.map(signalRow), 'None.', { 'aria-label': 'Consumed signals' }));
    virtualTable('journal', ['Seq', 'At', 'Event', 'Details'], snapshot.steps.journal, (entry) => {
      const kind = Object.keys(entry.event)[0] || '';
      const details = JSON.stringify(entry.event[kind]);
      return el('tr', { class: 'entry', 'data-key': String(entry.seq), 'data-kind': kind }, el('td', { class: 'num' }, entry.seq),
        el('td', {}, time(entry.at)), el('td', {}, kind),
        el('td', { class: 'mono wrap', title: details }, details.length > 240 ? details.slice(0, 240) + '…' : details));
    }, 'Nothing journaled yet.');
  }

  // JSON as a tree that folds: objects and arrays are <details> (open), whose text, read whole,
  // is the JSON itself (a folded one shows `…` by CSS), so copying or reading it gives JSON.
  function jsonTree(value, depth) {
    const level = depth || 0;
    if (value === null || typeof value !== 'object') {
      const kind = value === null ? 'null' : typeof value;
      return el('span', { class: 'json-' + kind }, JSON.stringify(value));
    }
    const array = Array.isArray(value);
    const entries = array ? value.map((v, i) => [i, v]) : Object.entries(value);
    const [open, close] = array ? ['[', ']'] : ['{', '}'];
    if (!entries.length) return el('span', {}, open + close);
    const size = entries.length + (array ? (entries.length === 1 ? ' item' : ' items') : (entries.length === 1 ? ' key' : ' keys'));
    return el('details', { open: level < 3 || entries.length < 20, class: 'json-node' },
      el('summary', { 'data-size': size, 'data-close': close }, open),
      entries.map(([key, item], i) => el('div', { class: 'json-item' },
        array ? null : [el('span', { class: 'json-key' }, JSON.stringify(key)), ': '],
        jsonTree(item, level + 1), i < entries.length - 1 ? ',' : '')),
      el('span', { class: 'json-close' }, close));
  }

  // A JSON viewer of `value` with a copy button, its tree in an element with id `id`.
  function jsonView(id, value) {
    return el('div', { class: 'json-view', 'data-key': id },
      el('button', { class: 'copy', type: 'button', 'data-copy': id }, 'Copy'),
      el('div', { id, class: 'json mono', tabindex: 0, role: 'region', 'aria-label': id + ' (JSON)' }, jsonTree(value)));
  }

  // Copies the JSON of the viewer a Copy button names (one listener for the page).
  document.addEventListener('click', async (event) => {
    const button = event.target.closest('button[data-copy]');
    if (!button) return;
    const source = document.getElementById(button.dataset.copy);
    const text = JSON.stringify(JSON.parse(source.textContent), null, 2);
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = 'Copied';
    } catch (_) {
      const range = document.createRange();
      range.selectNodeContents(source);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      button.textContent = 'Selected: press Ctrl+C';
    }
    setTimeout(() => { button.textContent = 'Copy'; }, 2000);
  });

  // The status of a scope from its steps': open if any is, else failed if any failed, else
  // completed.
  function scopeStatus(phases) {
    if (phases.some((p) => ['retrying', 'sleeping', 'waiting'].includes(p))) return 'running';
    if (phases.some((p) => p === 'failed')) return 'failed';
    if (phases.some((p) => p === 'abandoned')) return 'cancelled';
    return 'completed';
  }

  // The run's scopes (branches, `each` items, loop iterations, children) as a tree, each with
  // its status and its steps; a child's scope links to the child run.
  function runGraph(steps, run, workflow) {
    if (!steps.length) return el('p', { class: 'empty' }, 'No steps yet.');
    const root = { children: new Map(), phases: [] };
    for (const step of steps) {
      const segments = step.path.split('/');
      let node = root;
      node.phases.push(step.phase);
      segments.forEach((segment, i) => {
        const path = segments.slice(0, i + 1).join('/');
        if (!node.children.has(segment)) node.children.set(segment, { path, segment, children: new Map(), phases: [], step: null });
        node = node.children.get(segment);
        node.phases.push(step.phase);
      });
      node.step = step;
    }
    const children = new Set(run.children || []);
    const item = (node) => {
      const leaf = node.step && !node.children.size;
      const status = leaf ? node.step.phase : scopeStatus(node.phases);
      const childId = /(^|\/)~child\[\d+\]$/.test(node.path) ? run.id + ':' + node.path.replace(/\//g, ':') : null;
      const counts = leaf ? '' : ' ' + node.phases.length + (node.phases.length === 1 ? ' step' : ' steps');
      return el('li', { role: 'treeitem', 'aria-expanded': leaf ? null : 'true', class: 'graph-node', 'data-key': node.path,
        'data-path': node.path, 'data-status': status, 'data-kind': leaf ? node.step.kind : 'scope' },
      el('span', { class: 'mono' }, node.segment), ' ', el('span', { class: 'status status-' + phaseClass(status) }, status.replace('_', ' ')),
      el('span', { class: 'muted' }, counts, leaf && node.step.ended_at ? ' · ' + duration(stepDuration(node.step)) : ''),
      childId && children.has(childId) ? [' → ', el('a', { class: 'mono child-run', href: '#/runs/-/' + encodeURIComponent(childId) }, 'child run ' + childId)] : null,
      leaf ? null : el('ul', { role: 'group' }, items(node)));
    };
    // A scope's first GRAPH_SHOWN children, and how many more (by status) unless all are asked for.
    const items = (node) => {
      const all = Array.from(node.children.values());
      if (all.length <= GRAPH_SHOWN || graphAll) return all.map(item);
      const rest = all.slice(GRAPH_SHOWN);
      const counts = new Map();
      for (const other of rest) {
        const status = other.step && !other.children.size ? other.step.phase : scopeStatus(other.phases);
        counts.set(status, (counts.get(status) || 0) + 1);
      }
      const said = Array.from(counts.entries()).map(([status, n]) => number(n) + ' ' + status.replace('_', ' ')).join(', ');
      return [all.slice(0, GRAPH_SHOWN).map(item), el('li', { class: 'graph-more', 'data-key': node.path + ' more' },
        el('span', { class: 'muted' }, number(rest.length) + ' more (' + said + ') '),
        el('button', { type: 'button', 'data-graph': 'all' }, 'Show all'))];
    };
    return el('ul', { class: 'graph', role: 'tree', tabindex: 0, 'aria-label': 'Scopes and steps of ' + workflow + ' run ' + run.id },
      items(root));
  }

  // Scopes with more children than this show the first ones and a count of the rest, until all
  // are asked for (`graphAll`, per page).
  const GRAPH_SHOWN = 100;
  let graphAll = false;
  document.addEventListener('click', (event) => {
    if (!event.target.closest('button[data-graph]')) return;
    graphAll = true;
    if (lastRun) renderRun(lastRun.snapshot, lastRun.workflow);
  });

  // The run page's last snapshot, to draw again on demand.
  let lastRun = null;

  // The badge colour of a step phase or scope status.
  function phaseClass(phase) {
    return { completed: 'completed', slept: 'completed', received: 'completed', failed: 'failed', abandoned: 'cancelled',
      timed_out: 'cancelled', retrying: 'paused', running: 'running', sleeping: 'suspended', waiting: 'suspended',
      cancelled: 'cancelled' }[phase] || 'pending';
  }

  // The durable values the journal holds, each as last set.
  function durableValues(journal) {
    const values = new Map();
    for (const entry of journal) if (entry.event.var_set) values.set(entry.event.var_set.name, { value: entry.event.var_set.value, at: entry.at });
    return table(['Name', 'Value', 'Set'], Array.from(values.entries()).map(([name, v]) =>
      el('tr', { class: 'var', 'data-key': name, 'data-name': name }, el('td', { class: 'mono' }, name),
        el('td', { class: 'mono' }, JSON.stringify(v.value)), el('td', {}, time(v.at)))), 'None set.');
  }

  // What an unended run waits for: its open waits and sleeps, and a flow rule holding it back.
  function waitingFor(steps, run) {
    const open = steps.filter((s) => !s.ended_at && (s.kind === 'wait' || s.kind === 'sleep'));
    const parts = open.map((s) => (s.kind === 'wait'
      ? el('span', { class: 'waiting-wait', 'data-event': s.event || '' }, 'signal ', el('span', { class: 'mono' }, s.event || '?'),
        s.until ? [' until ', time(s.until)] : ' (no deadline)', ' at ', el('span', { class: 'mono' }, s.path))
      : el('span', {}, 'sleep ', el('span', { class: 'mono' }, s.path), s.until ? [' until ', time(s.until)] : '')));
    if (run.waiting_for) parts.push(el('span', {}, 'its ', run.waiting_for, ' rule', run.wake_at ? [' until ', time(run.wake_at)] : ''));
    return parts.flatMap((p, i) => [i ? '; ' : '', p]);
  }

  const stepDuration = (step) => (step.ended_at ? Date.parse(step.ended_at) - Date.parse(step.started_at) : null);

  // What `cairn runs steps` prints: each step with its phase, start, duration and attempts.
  function stepsTable(steps) {
    virtualTable('steps', ['Step', 'Kind', 'Phase', 'Started', 'Took', 'Attempts', 'Details'], steps, (step) => {
      const last = step.attempts[step.attempts.length - 1];
      const details = step.kind === 'wait' ? 'for ' + (step.event || 'a signal') + (step.until ? ' until ' + localTime(step.until) : '')
        : step.kind === 'sleep' ? (step.until ? 'until ' + localTime(step.until) : '')
          : last && last.error ? last.error : '';
      return el('tr', { class: 'step-row', 'data-key': step.path, 'data-path': step.path, 'data-phase': step.phase },
        el('td', { class: 'mono id' }, step.path), el('td', {}, step.kind), el('td', {}, step.phase.replace('_', ' ')),
        el('td', {}, time(step.started_at)),
        el('td', { class: 'num' }, step.ended_at ? duration(stepDuration(step)) : 'open'),
        el('td', { class: 'num' }, step.kind === 'step' ? step.attempts.length : ''),
        el('td', { class: last && last.error ? 'error-text' : '' }, details));
    }, 'No steps yet.', { id: 'steps-table' });
  }

  // Ticks for an axis over `span` ms: round steps (1, 2 or 5 times a power of ten of ms,
  // seconds, minutes, hours or days), about five.
  function ticks(span) {
    const units = [1, 1000, 60000, 3600000, 86400000];
    let unit = units[0];
    for (const u of units) if (span / u >= 2) unit = u;
    const raw = span / unit / 5;
    const power = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-9))));
    const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) * unit;
    const out = [];
    for (let t = 0; t <= span + 1e-9 && out.length < 12; t += step) out.push(t);
    return out;
  }

  // Lists longer than this are drawn a window at a time (what is in view, and a margin).
  const VIRTUAL_AT = 300;
  const ROW_PX = 30;

  // A table in element `id` of `items`, each made a row by `row`; a long one scrolls in a box
  // of its own that draws only the rows in view.
  function virtualTable(id, headings, items, row, emptyText, attrs) {
    const host = document.getElementById(id);
    if (!host) return;
    if (items.length < VIRTUAL_AT) {
      replace(id, table(headings, items.map(row), emptyText, attrs));
      return;
    }
    let box = host.querySelector(':scope > .vscroll');
    if (!box) {
      box = el('div', { class: 'vscroll', tabindex: 0, role: 'region', 'aria-label': id + ': ' + items.length + ' rows, scroll to read' },
        el('table', attrs || {}, el('thead', {}, el('tr', {}, headings.map((h) => el('th', { scope: 'col' }, h)))), el('tbody', {})));
      box.addEventListener('scroll', () => requestAnimationFrame(() => drawRows(box)));
      host.replaceChildren(box);
    }
    box.cairn = { items, row, columns: headings.length };
    drawRows(box);
  }

  function drawRows(box) {
    const { items, row, columns } = box.cairn;
    const first = Math.max(0, Math.floor(box.scrollTop / ROW_PX) - 10);
    const last = Math.min(items.length, first + Math.ceil((box.clientHeight || 600) / ROW_PX) + 20);
    const spacer = (rows, key) => el('tr', { class: 'spacer', 'data-key': key, 'aria-hidden': 'true', style: 'height:' + rows * ROW_PX + 'px' },
      el('td', { colspan: columns }));
    morphChildren(box.querySelector('tbody'), [spacer(first, 'above'), ...items.slice(first, last).map(row), spacer(items.length - last, 'below')]);
  }

  // How far the timeline is zoomed (1: the run fits the width), kept per page.
  let zoom = 1;

  // Each step a row: its attempts as bars (failed ones red, the time waiting to retry dashed),
  // sleeps and waits as bars of their own colour, over the run's time from its start with a
  // time axis; each row says its phase and how long it took. Zoom widens the time axis (the box
  // scrolls sideways); a long run's rows are drawn as they come into view.
  function drawTimeline(steps, run) {
    const host = document.getElementById('timeline');
    if (!host) return;
    if (!steps.length) { replace('timeline', el('p', { class: 'empty' }, 'No steps yet.')); return; }
    const now = Date.now();
    const ended = ENDED.has(run.status);
    const end = run.completed_at ? Date.parse(run.completed_at) : now;
    const at = (iso) => (iso ? Date.parse(iso) : ended ? end : now);
    let t0 = Date.parse(run.created_at);
    let t1 = end;
    for (const step of steps) {
      t0 = Math.min(t0, at(step.started_at));
      t1 = Math.max(t1, at(step.ended_at));
      for (const attempt of step.attempts) if (attempt.retry_at && !step.ended_at) t1 = Math.max(t1, at(attempt.retry_at));
    }
    const span = Math.max(t1 - t0, 1);
    const [left, row, right] = [200, 22, 70];
    const fit = Math.max((host.clientWidth || 890) - 2, 400);
    const width = (fit - left - right) * zoom;
    const full = left + width + right;
    const x = (t) => left + ((t - t0) / span) * width;
    const w = (a, b) => Math.max(((b - a) / span) * width, 2);
    const many = steps.length >= VIRTUAL_AT;
    const height = 24 + steps.length * row;
    const scroller = host.querySelector(':scope > .tscroll');
    const first = many && scroller ? Math.max(0, Math.floor(scroller.scrollTop / row) - 10) : 0;
    const last = many ? Math.min(steps.length, first + Math.ceil(((scroller && scroller.clientHeight) || 600) / row) + 20) : steps.length;
    const axis = ticks(span).map((t) => [
      svg('line', { x1: x(t0 + t), x2: x(t0 + t), y1: 16, y2: height }),
      svg('text', { x: x(t0 + t), y: 12, 'text-anchor': t === 0 ? 'start' : 'middle' }, '+' + duration(t))]);
    const rows = [];
    for (let i = first; i < last; i++) rows.push(stepBars(steps[i], 22 + i * row, { at, x, w, t1, row, left, width, right }));
    const label = 'Timeline of ' + steps.length + ' steps over ' + duration(span) + '; the steps table below lists them';
    const chart = svg('svg', { class: 'timeline', width: full, height, viewBox: '0 0 ' + full + ' ' + height, role: 'img',
      'aria-label': label, 'data-key': 'chart' }, svg('g', { class: 'axis', 'data-key': 'axis' }, axis), rows);
    const controls = el('div', { class: 'zoom', 'data-key': 'zoom' },
      el('button', { type: 'button', id: 'zoom-in', 'data-zoom': '2' }, 'Zoom in'), ' ',
      el('button', { type: 'button', id: 'zoom-out', 'data-zoom': '0.5', disabled: zoom <= 1 }, 'Zoom out'), ' ',
      el('button', { type: 'button', id: 'zoom-fit', 'data-zoom': '0', disabled: zoom === 1 }, 'Fit'),
      el('span', { class: 'muted' }, ' ×' + zoom + (many ? ' · ' + steps.length + ' rows, drawn as they scroll into view' : '')));
    if (!scroller) {
      const box = el('div', { class: 'tscroll', 'data-key': 'tscroll', tabindex: 0, role: 'region', 'aria-label': 'Timeline, scrolls' });
      box.addEventListener('scroll', () => { if (box.cairn && box.cairn.many) requestAnimationFrame(box.cairn.redraw); });
      host.replaceChildren(controls, box);
    } else {
      morph(host.querySelector(':scope > .zoom'), controls);
    }
    const box = host.querySelector(':scope > .tscroll');
    box.cairn = { many, redraw: () => drawTimeline(steps, run) };
    morphChildren(box, [chart]);
  }

  // Zoom buttons (one listener for the page; the timeline is redrawn from its last data).
  document.addEventListener('click', (event) => {
    const button = event.target.closest('button[data-zoom]');
    if (!button) return;
    const factor = Number(button.dataset.zoom);
    zoom = factor === 0 ? 1 : Math.min(Math.max(zoom * factor, 1), 64);
    const box = document.querySelector('#timeline > .tscroll');
    if (box && box.cairn) box.cairn.redraw();
  });

  // One step's row of the timeline at height `y`.
  function stepBars(step, y, g) {
    const { at, x, w, t1, row, left, width, right } = g;
    const title = (text) => svg('title', {}, text);
    const bars = [];
    if (step.kind === 'step') {
      step.attempts.forEach((attempt, n) => {
        const [a, b] = [at(attempt.started_at), at(attempt.ended_at)];
        bars.push(svg('rect', { class: 'attempt' + (attempt.error ? ' failed' : ''), x: x(a), y, width: w(a, b), height: row - 8 },
          title(step.path + ' attempt ' + attempt.attempt + ': ' + duration(attempt.duration_ms) + (attempt.error ? ' — ' + attempt.error : ''))));
        if (attempt.retry_at) {
          const next = step.attempts[n + 1];
          const until = next ? at(next.started_at) : Math.min(at(attempt.retry_at), t1);
          bars.push(svg('rect', { class: 'retry-wait', x: x(b), y: y + 1, width: w(b, until), height: row - 10 },
            title('waiting to retry until ' + localTime(attempt.retry_at))));
        }
      });
      if (step.phase === 'abandoned') {
        const a = step.attempts.length ? at(step.attempts[step.attempts.length - 1].ended_at) : at(step.started_at);
        bars.push(svg('rect', { class: 'abandoned', x: x(a), y, width: w(a, at(step.ended_at)), height: row - 8 },
          title(step.path + ': ended with the run')));
      } else if (!step.attempts.length || !['completed', 'failed', 'retrying'].includes(step.phase)) {
        const a = at(step.started_at);
        bars.push(svg('rect', { class: 'attempt open', x: x(a), y, width: w(a, at(step.ended_at)), height: row - 8 },
          title(step.path + ': running')));
      }
    } else {
      const [a, b] = [at(step.started_at), at(step.ended_at)];
      const what = step.kind === 'sleep' ? 'sleep' + (step.until ? ' until ' + localTime(step.until) : '')
        : 'wait for ' + (step.event || 'a signal') + (step.until ? ' until ' + localTime(step.until) : '');
      bars.push(svg('rect', { class: step.kind + ' ' + step.phase, x: x(a), y, width: w(a, b), height: row - 8 },
        title(step.path + ': ' + what + ' (' + step.phase.replace('_', ' ') + ')')));
    }
    const took = step.ended_at ? duration(stepDuration(step)) : 'open';
    return svg('g', { class: 'step', 'data-key': step.path, 'data-path': step.path, 'data-kind': step.kind, 'data-phase': step.phase },
      svg('text', { x: 4, y: y + 11 }, (step.path.length > 30 ? step.path.slice(0, 29) + '…' : step.path)),
      svg('text', { x: left - 6, y: y + 11, 'text-anchor': 'end', class: 'muted' }, step.phase.replace('_', ' ')),
      bars,
      svg('text', { x: left + width + right - 4, y: y + 11, 'text-anchor': 'end', class: 'duration muted' }, took));
  }

  // ---- schedules -----------------------------------------------------------------------------

  // Reads `path` now and every two seconds until another page replaces this one.
  function poll(path, handlers) {
    const controller = takeOver();
    (async () => {
      while (!controller.signal.aborted) {
        try {
          const data = await api('GET', path);
          if (controller.signal.aborted) return;
          setLive(true);
          handlers.data(data);
        } catch (error) {
          setLive(false);
          if (handlers.error) handlers.error(error);
        }
        await new Promise((resolve) => setTimeout(resolve, 2000));
      }
    })();
  }

  function when(schedule) {
    if (schedule.every_ms) return 'every ' + duration(schedule.every_ms);
    return schedule.cron.join(' | ') + (schedule.time_zone ? ' (' + schedule.time_zone + ')' : ' (UTC)');
  }

  function schedulesPage() {
    const declare = async (event) => {
      event.preventDefault();
      const value = (id) => document.getElementById(id).value.trim();
      const name = value('schedule-name');
      let input;
      try { input = jsonField('schedule-input'); } catch (error) { return act('declare', () => Promise.reject(error)); }
      const body = { workflow: value('schedule-workflow'), input, catchUp: value('schedule-catchup') };
      const cron = value('schedule-cron').split(/\n|\|/).map((c) => c.trim()).filter(Boolean);
      if (cron.length) body.cron = cron;
      if (value('schedule-every')) body.every = value('schedule-every');
      if (value('schedule-zone')) body.timeZone = value('schedule-zone');
      const answer = await act('declare ' + name, () => api('PUT', 'v1/schedules/' + encodeURIComponent(name), body));
      if (answer) api('GET', 'v1/schedules').then(renderSchedules).catch(() => {});
      return answer;
    };
    const field = (label, attrs) => el('label', {}, label, el('input', attrs));
    show(
      el('h1', {}, 'Schedules'),
      el('details', { id: 'schedule-panel', class: 'panel' }, el('summary', {}, 'Declare or change a schedule'),
        el('form', { id: 'schedule-form', class: 'filters', onsubmit: declare },
          field('Name', { id: 'schedule-name', size: 14, required: true, placeholder: 'nightly' }),
          el('label', {}, 'Workflow', el('select', { id: 'schedule-workflow', required: true })),
          el('label', {}, 'Cron (one per line)', el('textarea', { id: 'schedule-cron', rows: 2, placeholder: '0 3 * * *' })),
          field('or every', { id: 'schedule-every', size: 8, placeholder: '15m' }),
          field('Time zone', { id: 'schedule-zone', size: 14, placeholder: 'UTC' }),
          el('label', {}, 'Missed firings', el('select', { id: 'schedule-catchup' },
            el('option', { value: 'once' }, 'once'), el('option', { value: 'skip' }, 'skip'), el('option', { value: 'all:100' }, 'all (up to 100)'))),
          el('label', { class: 'wide' }, 'Input (JSON)', el('textarea', { id: 'schedule-input', rows: 2 })),
          el('button', { id: 'schedule-save', class: 'primary act', type: 'submit' }, 'Save'))),
      el('div', { id: 'confirm' }),
      el('p', { id: 'action-result', role: 'status' }),
      el('div', { id: 'schedules' }, el('p', { class: 'empty' }, 'Loading…')),
      el('div', { id: 'history' }));
    api('GET', 'v1/workflows').then((answer) => replace('schedule-workflow',
      answer.workflows.map((w) => el('option', { value: w.name, 'data-key': w.name }, w.name)))).catch(() => {});
    // One listener for every row's buttons: the table is redrawn on each refresh.
    document.getElementById('schedules').addEventListener('click', (event) => {
      const button = event.target.closest('button[data-action]');
      if (!button) return;
      const row = button.closest('tr');
      const name = row.dataset.name;
      const action = button.dataset.action;
      const path = 'v1/schedules/' + encodeURIComponent(name);
      const refresh = () => api('GET', 'v1/schedules').then(renderSchedules).catch(() => {});
      if (action === 'edit') return editSchedule(name);
      if (action === 'history') return scheduleHistory(name);
      if (action === 'delete') {
        return confirmInPage('confirm', 'Delete schedule ' + name + '? Its runs stay.', 'Delete it',
          () => act('delete ' + name, () => api('DELETE', path)).then(refresh));
      }
      return act(action + ' ' + name, () => api('POST', path + '/' + action)).then((answer) => {
        if (answer && action === 'trigger') {
          replace('action-result', 'trigger ' + name + ': started run ',
            el('a', { id: 'triggered-run', class: 'mono', href: runHref(answer.workflow, answer.id) }, answer.id));
        }
        return refresh();
      });
    });
    poll('v1/schedules', {
      data: renderSchedules,
      error: (error) => replace('schedules', el('p', { class: 'error-text' }, error.message + ' (' + error.code + ')')),
    });
  }

  // Fills the declaration form with schedule `name` as it is stored, and opens it.
  async function editSchedule(name) {
    try {
      const s = await api('GET', 'v1/schedules/' + encodeURIComponent(name));
      const set = (id, value) => { document.getElementById(id).value = value; };
      set('schedule-name', s.name);
      const workflow = document.getElementById('schedule-workflow');
      if (![...workflow.options].some((o) => o.value === s.workflow)) workflow.append(el('option', { value: s.workflow }, s.workflow));
      set('schedule-workflow', s.workflow);
      set('schedule-cron', s.cron.join('\n'));
      set('schedule-every', s.every_ms ? (s.every_ms % 1000 ? s.every_ms + 'ms' : s.every_ms / 1000 + 's') : '');
      set('schedule-zone', s.time_zone || '');
      const catchUp = document.getElementById('schedule-catchup');
      if (![...catchUp.options].some((o) => o.value === s.catch_up)) catchUp.append(el('option', { value: s.catch_up }, s.catch_up));
      set('schedule-catchup', s.catch_up);
      set('schedule-input', s.input === null ? '' : json(s.input));
      document.getElementById('schedule-panel').open = true;
      document.getElementById('schedule-name').focus();
    } catch (error) {
      act('edit ' + name, () => Promise.reject(error));
    }
  }

  // The runs schedule `name` started, newest first (their ids are `name@time`).
  async function scheduleHistory(name) {
    try {
      const page = await api('GET', 'v1/runs?limit=50&id_prefix=' + encodeURIComponent(name + '@'));
      replace('history', el('h2', { id: 'history-title' }, 'Firings of ', name),
        table(['Run', 'Status', 'Created', 'Ended'], page.runs.map((run) =>
          el('tr', { class: 'firing', 'data-key': run.id, 'data-id': run.id },
            el('td', { class: 'mono id' }, el('a', { href: runHref(run.workflow, run.id) }, run.id)),
            el('td', {}, statusBadge(run.status)), el('td', {}, time(run.created_at)), el('td', {}, time(run.completed_at)))),
        'It has started no runs yet.'),
        page.next_cursor ? el('p', {}, el('a', { href: '#/?id=' + encodeURIComponent(name + '@') }, 'All its runs')) : null);
      document.getElementById('history-title').scrollIntoView();
    } catch (error) {
      act('firings of ' + name, () => Promise.reject(error));
    }
  }

  function renderSchedules(answer) {
    const rows = answer.schedules.map((s) => {
      const last = s.last_run ? el('a', { href: runHref(s.workflow, s.last_run) }, time(s.last_fired_at)) : '';
      const button = (action, text, extra) => el('button', { 'data-action': action, class: 'act' + (extra || ''), disabled: offline }, text);
      return el('tr', { class: 'schedule', 'data-key': s.name, 'data-name': s.name, 'data-state': s.paused ? 'paused' : 'active' },
        el('td', { class: 'mono id' }, s.name),
        el('td', {}, el('a', { href: '#/?workflow=' + encodeURIComponent(s.workflow) }, s.workflow)),
        el('td', { class: 'mono' }, when(s)), el('td', {}, s.catch_up),
        el('td', {}, s.paused ? el('span', { class: 'status status-paused' }, 'paused') : time(s.next_fire_at)),
        el('td', {}, last),
        el('td', { class: 'row-actions' },
          s.paused ? button('resume', 'Resume') : button('pause', 'Pause'), ' ', button('trigger', 'Trigger now'), ' ',
          button('history', 'Firings'), ' ', button('edit', 'Edit'), ' ', button('delete', 'Delete…', ' danger')));
    });
    replace('schedules', table(['Schedule', 'Workflow', 'When', 'Catch-up', 'Next firing', 'Last firing', 'Actions'], rows,
      'No schedules. Declare one above, with EngineBuilder::schedule, `cairn schedules put` or PUT /v1/schedules/{name}.'));
  }

  // ---- events --------------------------------------------------------------------------------

  // Published events, newest first, with the runs each started: the first page followed every
  // two seconds, older pages read on request. `params` may name a topic.
  function eventsPage(params) {
    const topic = params.get('topic') || '';
    const query = 'v1/events?limit=50' + (topic ? '&topic=' + encodeURIComponent(topic) : '');
    // The first page as last read, the older pages read since (null: none yet), and where the
    // next older page starts.
    let first = [];
    let older = null;
    let next = null;
    const row = (event) => el('tr', { 'data-key': event.id, class: 'event-row' },
      el('td', {}, time(event.published_at)),
      el('td', { class: 'mono' }, event.id),
      el('td', {}, el('a', { class: 'mono', href: '#/events?topic=' + encodeURIComponent(event.topic) }, event.topic)),
      el('td', {}, el('code', { class: 'payload' }, shorten(JSON.stringify(event.payload), 120))),
      el('td', {}, event.runs.length
        ? event.runs.map((r, i) => [i ? ', ' : '', r.workflow, ' ', el('a', { class: 'mono event-run', href: runHref(r.workflow, r.id) }, r.id)])
        : el('span', { class: 'muted' }, 'none: no workflow subscribed')));
    const render = () => {
      const seen = new Set(first.map((e) => e.id));
      const rows = first.concat((older || []).filter((e) => !seen.has(e.id))).map(row);
      replace('events', table(['Published', 'Id', 'Topic', 'Payload', 'Runs started'], rows,
        topic ? 'No events published to ' + topic + ' are kept.'
          : 'No events yet. Publish one above, or with Client::publish, `cairn events publish` or POST /v1/events/{topic}.',
        { 'aria-label': 'Published events' }));
      replace('events-more', next ? el('button', { id: 'older-events', onclick: readOlder }, 'Show older events') : null);
    };
    const showFirst = (page) => {
      first = page.events;
      if (older === null) next = page.next_cursor;
      render();
    };
    const readOlder = async () => {
      if (!next) return;
      try {
        const page = await api('GET', query + '&cursor=' + encodeURIComponent(next));
        older = (older || []).concat(page.events);
        next = page.next_cursor;
        render();
      } catch (error) {
        replace('events-more', el('p', { class: 'error-text' }, error.message + ' (' + error.code + ')'));
      }
    };
    show(
      el('h1', {}, topic ? ['Events on ', el('span', { class: 'mono' }, topic)] : 'Events'),
      topic ? el('p', {}, el('a', { href: '#/events', id: 'all-events' }, '← every topic')) : null,
      el('form', { id: 'event-filter', class: 'filters', onsubmit: (e) => {
        e.preventDefault();
        const value = document.getElementById('topic-filter').value.trim();
        location.hash = '#/events' + (value ? '?topic=' + encodeURIComponent(value) : '');
      } },
        el('label', {}, 'Topic', el('input', { id: 'topic-filter', size: 16, value: topic, placeholder: 'user.signup' })),
        el('button', { type: 'submit', class: 'primary' }, 'Show')),
      publishPanel(() => api('GET', query).then(showFirst).catch(() => {})),
      el('p', { id: 'action-result', role: 'status' }),
      el('div', { id: 'events' }, el('p', { class: 'empty' }, 'Loading…')),
      el('div', { id: 'events-more' }));
    poll(query, {
      data: showFirst,
      error: (error) => replace('events', el('p', { class: 'error-text', id: 'events-error' }, error.message + ' (' + error.code + ')')),
    });
  }

  const shorten = (text, max) => (text.length > max ? text.slice(0, max - 1) + '…' : text);

  // ---- routing -------------------------------------------------------------------------------

  function route() {
    marked.clear();
    performance.clearMarks();
    const [path, query] = (location.hash.replace(/^#/, '') || '/').split('?');
    const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
    if (parts[0] === 'runs' && parts.length === 3 && parts[1] === '-') anyRun(parts[2]);
    else if (parts[0] === 'runs' && parts.length === 3) runPage(parts[1], parts[2]);
    else if (parts[0] === 'schedules') schedulesPage();
    else if (parts[0] === 'events' && parts.length === 1) eventsPage(new URLSearchParams(query || ''));
    else if (parts.length === 0) runsPage(new URLSearchParams(query || ''));
    else notFound(path);
  }

  // A link to a run by id alone (parents and children): finds its workflow, then shows it.
  async function anyRun(id) {
    takeOver();
    show(el('p', { class: 'empty' }, 'Finding run ', el('span', { class: 'mono' }, id), '…'));
    try {
      const run = await api('GET', 'v1/runs/' + encodeURIComponent(id));
      location.replace(runHref(run.workflow, id));
    } catch (error) {
      show(el('h1', {}, 'No such run'), el('p', { class: 'notice', id: 'run-error' },
        'There is no run ', el('span', { class: 'mono' }, id), ': ', error.message + ' (' + error.code + ').'));
    }
  }

  function notFound(path) {
    takeOver();
    show(el('h1', {}, 'No such page'),
      el('p', { class: 'notice', id: 'page-error' }, 'This dashboard has no page ', el('span', { class: 'mono' }, path),
        '. ', el('a', { href: '#/' }, 'See the runs'), '.'));
  }

  window.addEventListener('hashchange', route);
  // A browser holds six connections to a server at most: a page left (kept in the back-forward
  // cache) or a tab in the background lets its stream go, so other tabs and the next page get
  // one; the page takes it up again when shown.
  let letGoLater = null;
  const letGo = () => { if (stream) stream.abort(); stream = null; };
  window.addEventListener('pagehide', letGo);
  window.addEventListener('pageshow', (event) => { if (event.persisted) route(); });
  document.addEventListener('visibilitychange', () => {
    if (document.hidden) {
      letGoLater = setTimeout(letGo, 10000);
    } else {
      clearTimeout(letGoLater);
      if (!stream) route();
    }
  });
  route();
})();
