// The dashboard script, continued: one run, its steps, graph, timeline and actions.
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
