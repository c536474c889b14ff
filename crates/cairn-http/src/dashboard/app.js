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
