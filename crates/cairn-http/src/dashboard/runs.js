// The dashboard script, continued (the files are one script, joined in order by dashboard.rs;
// app.js opens it): the runs page, its search, start, publish and bulk panels.
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
      if (state.loading || !state.cursor) return;
      // Turned away while the server is out of reach: tried again once it may be back.
      if (offline) { setTimeout(() => { if (nearEnd()) loadOlder(); }, 1000); return; }
      state.loading = true;
      state.frozen = true;
      allow(more, false);
      let read = false;
      try {
        const page = new URLSearchParams(query);
        page.set('limit', String(PAGE));
        page.set('cursor', state.cursor);
        const answer = await api('GET', 'v1/runs?' + page);
        const known = new Set(state.older.map((r) => r.id));
        state.older.push(...answer.runs.filter((r) => !known.has(r.id)));
        state.cursor = answer.next_cursor || null;
        read = true;
      } catch (error) {
        replace('runs-count', el('span', { class: 'error-text' }, 'Older runs: ' + error.message + ' (' + error.code + ')'));
      }
      state.loading = false;
      redraw();
      // The end may still be in reach once the page is drawn (a scroll reached it while this
      // page was read, when the observer's call was turned away): read on, as that scroll
      // asked. Not after a failure, which the button retries.
      if (read) requestAnimationFrame(() => { if (nearEnd()) loadOlder(); });
    };
    // On the page still, and within the observer's margin of the bottom of the window.
    const nearEnd = () =>
      more.isConnected && !more.hidden && more.getBoundingClientRect().top < window.innerHeight + 400;
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
