'use strict';
// Cairn's dashboard: plain DOM, no framework, no build step. Every value from the server is put
// into the page as text (never as HTML).
(() => {
  const base = location.pathname.endsWith('/') ? location.pathname : location.pathname + '/';
  const STATUSES = ['pending', 'running', 'suspended', 'paused', 'completed', 'failed', 'cancelled', 'continued'];
  const ENDED = new Set(['completed', 'failed', 'cancelled', 'continued']);
  const view = document.getElementById('view');
  const liveBadge = document.getElementById('live');
  const tokenForm = document.getElementById('token-form');
  let stream = null;

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

  // Calls the API; answers its JSON or throws an Error with the API's code and message.
  async function api(method, path, body) {
    const init = { method, headers: headers(body === undefined ? {} : { 'Content-Type': 'application/json' }) };
    if (body !== undefined) init.body = typeof body === 'string' ? body : JSON.stringify(body);
    const response = await fetch(base + path, init);
    const text = await response.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (!response.ok) {
      if (response.status === 401) askToken();
      const detail = data && data.error ? data.error : { code: 'http_' + response.status, message: text };
      const error = new Error(detail.message);
      error.code = detail.code;
      throw error;
    }
    return data;
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
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  const time = (iso) => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '');

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

  function replace(id, ...children) {
    const node = document.getElementById(id);
    if (node) node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
  }

  function table(headings, rows, emptyText) {
    if (!rows.length) return el('p', { class: 'empty' }, emptyText);
    return el('table', {}, el('thead', {}, el('tr', {}, headings.map((h) => el('th', {}, h)))), el('tbody', {}, rows));
  }

  // ---- the runs page -------------------------------------------------------------------------

  function runsPage(params) {
    const workflow = params.get('workflow') || '';
    const status = params.get('status') || '';
    const go = () => {
      const next = new URLSearchParams();
      const w = document.getElementById('workflow-filter').value;
      const s = document.getElementById('status-filter').value;
      if (w) next.set('workflow', w);
      if (s) next.set('status', s);
      location.hash = '#/' + (next.toString() ? '?' + next : '');
    };
    view.replaceChildren(
      el('h1', {}, 'Runs'),
      el('div', { class: 'filters' },
        el('label', {}, 'Workflow ', el('select', { id: 'workflow-filter', onchange: go },
          el('option', { value: '' }, 'all'), workflow ? el('option', { value: workflow, selected: true }, workflow) : null)),
        el('label', {}, 'Status ', el('select', { id: 'status-filter', onchange: go },
          el('option', { value: '' }, 'all'),
          STATUSES.map((s) => el('option', { value: s, selected: s === status }, s)))),
        el('span', { id: 'runs-note', class: 'muted' })),
      el('div', { id: 'runs' }, el('p', { class: 'empty' }, 'Loading…')),
      el('h2', {}, 'Workflows'), el('div', { id: 'workflows' }),
      el('h2', {}, 'Workers'), el('div', { id: 'workers' }),
      el('h2', {}, 'Stranded'), el('div', { id: 'stranded' }));
    const query = new URLSearchParams({ limit: '50' });
    if (workflow) query.set('workflow', workflow);
    if (status) query.set('status', status);
    watch('v1/live/runs?' + query, {
      runs: (snapshot) => renderRuns(snapshot, workflow),
      error: (error) => replace('runs', el('p', { class: 'error-text' }, error.message)),
    });
  }

  function renderRuns(snapshot, workflow) {
    const names = snapshot.workflows.workflows.map((w) => w.name);
    if (workflow && !names.includes(workflow)) names.push(workflow);
    replace('workflow-filter', el('option', { value: '' }, 'all'),
      names.map((name) => el('option', { value: name, selected: name === workflow }, name)));
    const rows = snapshot.runs.runs.map((run) => {
      const note = run.stranded_reason ? 'stranded: ' + run.stranded_reason
        : run.error ? run.error : run.suspend_reason ? run.suspend_reason + (run.wake_at ? ' until ' + time(run.wake_at) : '') : '';
      return el('tr', { class: 'run', 'data-id': run.id, 'data-status': run.status },
        el('td', { class: 'mono' }, el('a', { href: runHref(run.workflow, run.id) }, run.id)),
        el('td', {}, run.workflow), el('td', { class: 'num' }, run.version),
        el('td', {}, statusBadge(run.status)), el('td', {}, time(run.created_at)), el('td', {}, time(run.updated_at)),
        el('td', { class: 'num' }, run.steps), el('td', { class: run.stranded ? 'error-text' : 'muted' }, note));
    });
    replace('runs', table(['Run', 'Workflow', 'Version', 'Status', 'Created', 'Updated', 'Steps', ''], rows,
      'No runs match.'));
    replace('runs-note', snapshot.runs.next_cursor ? 'the newest 50 shown' : '');
    replace('workflows', table(['Workflow', ...STATUSES, 'Total'], snapshot.workflows.workflows.map((w) =>
      el('tr', { 'data-workflow': w.name },
        el('td', {}, el('a', { href: '#/?workflow=' + encodeURIComponent(w.name) }, w.name)),
        STATUSES.map((s) => el('td', { class: 'num', 'data-status': s }, w.runs[s] || '')),
        el('td', { class: 'num' }, w.total))), 'No runs yet.'));
    replace('workers', table(['Worker', 'Host', 'PID', 'Started', 'Last seen', 'Serves'], snapshot.workers.workers.map((w) =>
      el('tr', { class: 'worker' }, el('td', { class: 'mono' }, w.id), el('td', {}, w.host), el('td', { class: 'num' }, w.pid),
        el('td', {}, time(w.started_at)), el('td', {}, time(w.last_seen)),
        el('td', {}, w.serves.map((k) => k.workflow + ' v' + k.version).join(', ')))), 'No live worker.'));
    replace('stranded', table(['Workflow', 'Version', 'Runs', 'Why'], snapshot.workers.stranded.map((s) =>
      el('tr', { class: 'stranded' }, el('td', {}, el('a', { href: '#/?workflow=' + encodeURIComponent(s.workflow) }, s.workflow)),
        el('td', { class: 'num' }, s.version), el('td', { class: 'num' }, s.runs), el('td', {}, s.reason))),
      'No stranded runs.'));
  }

  // ---- one run -------------------------------------------------------------------------------

  function runPage(workflow, id) {
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
    const restart = async () => {
      const from = document.getElementById('restart-step').value;
      const answer = await act('restart', () => api('POST', path + '/restart', { fromStep: from }));
      if (answer) location.hash = runHref(workflow, answer.run);
    };
    view.replaceChildren(
      el('p', {}, el('a', { href: '#/?workflow=' + encodeURIComponent(workflow) }, '← ' + workflow + ' runs')),
      el('h1', {}, workflow, ' / ', el('span', { class: 'mono' }, id), ' ', el('span', { id: 'run-status' })),
      el('dl', { class: 'facts', id: 'facts' }),
      el('h2', {}, 'Actions'),
      el('div', { class: 'actions' },
        el('button', { id: 'cancel', class: 'danger', onclick: () => act('cancel', () => api('DELETE', path)) }, 'Cancel'),
        el('button', { id: 'pause', onclick: () => act('pause', () => api('POST', path + '/pause')) }, 'Pause'),
        el('button', { id: 'resume', onclick: () => act('resume', () => api('POST', path + '/resume')) }, 'Resume'),
        el('fieldset', {}, el('label', {}, 'Restart from ', el('select', { id: 'restart-step' })),
          el('button', { id: 'restart', onclick: restart }, 'Restart')),
        el('form', { id: 'signal-form', onsubmit: sendSignal },
          el('fieldset', {},
            el('label', {}, 'Signal ', el('input', { id: 'signal-name', placeholder: 'event', size: 12 })),
            el('label', {}, 'Payload ', el('textarea', { id: 'signal-payload', placeholder: 'JSON (empty: null)' })),
            el('button', { id: 'send-signal', type: 'submit' }, 'Send')))),
      el('p', { id: 'action-result', role: 'status' }),
      el('div', { class: 'panels' },
        el('div', {}, el('h2', {}, 'Input'), el('pre', { id: 'input' })),
        el('div', {}, el('h2', {}, 'Output'), el('div', { id: 'outcome' }))),
      el('h2', {}, 'Timeline'),
      el('div', { class: 'legend' },
        el('span', {}, el('i', { style: 'background:#3559e0' }), 'step attempt'),
        el('span', {}, el('i', { style: 'background:#d92d20' }), 'failed attempt'),
        el('span', {}, el('i', { style: 'border:1px dashed #d92d20' }), 'waiting to retry'),
        el('span', {}, el('i', { style: 'background:#d9d2fe' }), 'sleep'),
        el('span', {}, el('i', { style: 'background:#fde9c4' }), 'wait for a signal')),
      el('div', { id: 'timeline' }),
      el('h2', {}, 'Pending signals'), el('div', { id: 'pending-signals' }),
      el('h2', {}, 'Consumed signals'), el('div', { id: 'consumed-signals' }),
      el('h2', {}, 'Journal'), el('div', { id: 'journal' }));
    watch(path + '/live', {
      run: (snapshot) => renderRun(snapshot, workflow),
      error: (error) => replace('facts', el('p', { class: 'error-text', id: 'run-error' }, error.message)),
    });
  }

  function renderRun(snapshot, workflow) {
    const run = snapshot.run;
    replace('run-status', statusBadge(run.status));
    const fact = (name, ...value) => [el('dt', {}, name), el('dd', {}, ...value)];
    const restarts = run.restarts || [];
    replace('facts',
      fact('status', statusBadge(run.status), run.pause_requested ? ' (pause requested)' : ''),
      fact('version', String(run.version)),
      fact('created', time(run.created_at)),
      fact('updated', time(run.updated_at)),
      run.completed_at ? fact('ended', time(run.completed_at)) : [],
      run.suspend_reason ? fact('suspended', run.suspend_reason, run.wake_at ? ' until ' + time(run.wake_at) : '') : [],
      run.deadline ? fact('deadline', time(run.deadline)) : [],
      run.delete_after ? fact('deleted after', time(run.delete_after)) : [],
      run.idempotency_key ? fact('idempotency key', el('span', { class: 'mono' }, run.idempotency_key)) : [],
      run.stranded_reason ? fact('stranded', el('span', { class: 'error-text' }, run.stranded_reason)) : [],
      run.restarted_from ? fact('restarted from',
        el('a', { id: 'restarted-from', class: 'mono', href: runHref(workflow, run.restarted_from) }, run.restarted_from)) : [],
      restarts.length ? fact('restarts', restarts.flatMap((r, i) =>
        [i ? ', ' : '', el('a', { class: 'mono restart-link', href: runHref(workflow, r) }, r)])) : [],
      run.continued_from ? fact('continues',
        el('a', { id: 'continued-from', class: 'mono', href: runHref(workflow, run.continued_from) }, run.continued_from)) : [],
      run.continued_as ? fact('continued as',
        el('a', { id: 'continued-as', class: 'mono', href: runHref(workflow, run.continued_as) }, run.continued_as)) : [],
      fact('steps journaled', String(run.steps)),
      run.recoveries ? fact('recoveries', String(run.recoveries)) : []);
    const ended = ENDED.has(run.status);
    document.getElementById('cancel').disabled = ended;
    document.getElementById('pause').disabled = ended || run.status === 'paused';
    document.getElementById('resume').disabled = run.status !== 'paused';
    document.getElementById('restart').disabled = !ended || !snapshot.steps.steps.length;
    document.getElementById('send-signal').disabled = ended;
    const restartStep = document.getElementById('restart-step');
    const chosen = restartStep.value;
    restartStep.replaceChildren(...snapshot.steps.steps.map((step) =>
      el('option', { value: step.path, selected: step.path === chosen }, step.path)));
    replace('input', json(run.input));
    replace('outcome',
      run.error ? el('pre', { id: 'error', class: 'error-text' }, run.error) : null,
      run.status === 'completed' ? el('pre', { id: 'output' }, json(run.output))
        : run.error ? null : el('p', { class: 'muted', id: 'output' }, 'Not finished.'));
    replace('timeline', timeline(snapshot.steps.steps, run));
    const pending = snapshot.signals.signals.filter((s) => s.consumed_seq === null || s.consumed_seq === undefined);
    const consumed = snapshot.signals.signals.filter((s) => !(s.consumed_seq === null || s.consumed_seq === undefined));
    const signalRow = (s) => el('tr', { class: 'signal', 'data-name': s.name },
      el('td', { class: 'num' }, s.id), el('td', {}, s.name), el('td', { class: 'mono' }, JSON.stringify(s.payload)),
      el('td', {}, time(s.sent_at)), el('td', { class: 'num' }, s.consumed_seq === null ? '' : s.consumed_seq));
    replace('pending-signals', table(['#', 'Name', 'Payload', 'Sent', ''], pending.map(signalRow), 'None.'));
    replace('consumed-signals', table(['#', 'Name', 'Payload', 'Sent', 'Journal seq'], consumed.map(signalRow), 'None.'));
    replace('journal', table(['Seq', 'At', 'Event', 'Details'], snapshot.steps.journal.map((entry) => {
      const kind = Object.keys(entry.event)[0] || '';
      const details = JSON.stringify(entry.event[kind]);
      return el('tr', { class: 'entry', 'data-kind': kind }, el('td', { class: 'num' }, entry.seq), el('td', {}, time(entry.at)),
        el('td', {}, kind), el('td', { class: 'mono', title: details }, details.length > 240 ? details.slice(0, 240) + '…' : details));
    }), 'Nothing journaled yet.'));
  }

  // Each step a row: its attempts as bars (failed ones red, the time waiting to retry dashed),
  // sleeps and waits as bars of their own colour, over the run's time from its start.
  function timeline(steps, run) {
    if (!steps.length) return el('p', { class: 'empty' }, 'No steps yet.');
    const now = Date.now();
    const at = (iso) => (iso ? Date.parse(iso) : now);
    const t0 = Math.min(Date.parse(run.created_at), ...steps.map((s) => at(s.started_at)));
    let t1 = run.completed_at ? Date.parse(run.completed_at) : now;
    for (const step of steps) {
      t1 = Math.max(t1, at(step.ended_at));
      for (const attempt of step.attempts) if (attempt.retry_at && !step.ended_at) t1 = Math.max(t1, at(attempt.retry_at));
    }
    const span = Math.max(t1 - t0, 1);
    const [left, width, row] = [200, 680, 22];
    const x = (t) => left + ((t - t0) / span) * width;
    const w = (a, b) => Math.max(((b - a) / span) * width, 2);
    const height = 24 + steps.length * row;
    const axis = svg('g', { class: 'axis' }, [0, 0.25, 0.5, 0.75, 1].map((f) => [
      svg('line', { x1: left + f * width, x2: left + f * width, y1: 16, y2: height }),
      svg('text', { x: left + f * width, y: 12, 'text-anchor': f === 1 ? 'end' : f === 0 ? 'start' : 'middle' },
        '+' + duration(f * span))]));
    const rows = steps.map((step, i) => {
      const y = 22 + i * row;
      const title = (text) => svg('title', {}, text);
      const bars = [];
      if (step.kind === 'step') {
        step.attempts.forEach((attempt, n) => {
          const [a, b] = [at(attempt.started_at), at(attempt.ended_at)];
          bars.push(svg('rect', { class: 'attempt' + (attempt.error ? ' failed' : ''), x: x(a), y, width: w(a, b), height: row - 8 },
            title(step.path + ' attempt ' + attempt.attempt + ': ' + duration(attempt.duration_ms) + (attempt.error ? ' — ' + attempt.error : ''))));
          if (attempt.retry_at) {
            const next = step.attempts[n + 1];
            const end = next ? at(next.started_at) : Math.min(at(attempt.retry_at), t1);
            bars.push(svg('rect', { class: 'retry-wait', x: x(b), y: y + 1, width: w(b, end), height: row - 10 },
              title('waiting to retry until ' + time(attempt.retry_at))));
          }
        });
        if (!step.attempts.length || (step.phase !== 'completed' && step.phase !== 'failed' && step.phase !== 'retrying')) {
          const a = at(step.started_at);
          bars.push(svg('rect', { class: 'attempt open', x: x(a), y, width: w(a, at(step.ended_at)), height: row - 8 },
            title(step.path + ': running')));
        }
      } else {
        const [a, b] = [at(step.started_at), at(step.ended_at)];
        const what = step.kind === 'sleep' ? 'sleep' + (step.until ? ' until ' + time(step.until) : '')
          : 'wait for ' + (step.event || 'a signal') + (step.until ? ' until ' + time(step.until) : '');
        bars.push(svg('rect', { class: step.kind + ' ' + step.phase, x: x(a), y, width: w(a, b), height: row - 8 },
          title(step.path + ': ' + what + ' (' + step.phase.replace('_', ' ') + ')')));
      }
      return svg('g', { class: 'step', 'data-path': step.path, 'data-kind': step.kind, 'data-phase': step.phase },
        svg('text', { x: 4, y: y + 11 }, (step.path.length > 30 ? step.path.slice(0, 29) + '…' : step.path)),
        svg('text', { x: left - 6, y: y + 11, 'text-anchor': 'end', class: 'muted' }, step.phase.replace('_', ' ')),
        bars);
    });
    return svg('svg', { class: 'timeline', viewBox: '0 0 ' + (left + width + 10) + ' ' + height, role: 'img',
      'aria-label': 'Timeline of ' + steps.length + ' steps' }, axis, rows);
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
    view.replaceChildren(
      el('h1', {}, 'Schedules'),
      el('p', { id: 'action-result', role: 'status' }),
      el('div', { id: 'schedules' }, el('p', { class: 'empty' }, 'Loading…')));
    // One listener for every row's buttons: the table is redrawn on each refresh.
    document.getElementById('schedules').addEventListener('click', (event) => {
      const button = event.target.closest('button[data-action]');
      if (!button) return;
      const name = button.closest('tr').dataset.name;
      const action = button.dataset.action;
      act(action + ' ' + name, () => api('POST', 'v1/schedules/' + encodeURIComponent(name) + '/' + action))
        .then(() => api('GET', 'v1/schedules')).then(renderSchedules).catch(() => {});
    });
    poll('v1/schedules', {
      data: renderSchedules,
      error: (error) => replace('schedules', el('p', { class: 'error-text' }, error.message)),
    });
  }

  function renderSchedules(answer) {
    const rows = answer.schedules.map((s) => {
      const last = s.last_run ? el('a', { href: runHref(s.workflow, s.last_run) }, time(s.last_fired_at)) : '';
      return el('tr', { class: 'schedule', 'data-name': s.name, 'data-state': s.paused ? 'paused' : 'active' },
        el('td', { class: 'mono' }, s.name),
        el('td', {}, el('a', { href: '#/?workflow=' + encodeURIComponent(s.workflow) }, s.workflow)),
        el('td', { class: 'mono' }, when(s)), el('td', {}, s.catch_up),
        el('td', {}, s.paused ? el('span', { class: 'status status-paused' }, 'paused') : time(s.next_fire_at)),
        el('td', {}, last),
        el('td', { class: 'row-actions' },
          s.paused ? el('button', { 'data-action': 'resume' }, 'Resume') : el('button', { 'data-action': 'pause' }, 'Pause'),
          el('button', { 'data-action': 'trigger' }, 'Trigger now')));
    });
    replace('schedules', table(['Schedule', 'Workflow', 'When', 'Catch-up', 'Next firing', 'Last firing', ''], rows,
      'No schedules. Declare one with EngineBuilder::schedule, `cairn schedules put` or PUT /v1/schedules/{name}.'));
  }

  // ---- routing -------------------------------------------------------------------------------

  function route() {
    const [path, query] = (location.hash.replace(/^#/, '') || '/').split('?');
    const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
    if (parts[0] === 'runs' && parts.length === 3) runPage(parts[1], parts[2]);
    else if (parts[0] === 'schedules') schedulesPage();
    else runsPage(new URLSearchParams(query || ''));
  }

  window.addEventListener('hashchange', route);
  route();
})();
