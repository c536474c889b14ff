// The dashboard script, continued and closed: the schedules and events pages, and routing.
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
