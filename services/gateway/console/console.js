// memstream console: plain DOM and fetch, no framework and nothing from a CDN. Every call is the
// public HTTP API with the key the user typed (kept in sessionStorage: gone when the tab closes).

const $ = (sel) => document.querySelector(sel);
const el = (tag, props = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    // CSSOM, not a style attribute: the console's Content-Security-Policy allows no inline styles.
    else if (k === 'style') e.style.cssText = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c ?? '')));
  return e;
};

const state = { key: sessionStorage.getItem('memstream.key') ?? '', admin: false, tags: null, selected: null, events: null, refreshTimer: null };

function showError(err) {
  const box = $('#error');
  if (!err) {
    box.hidden = true;
    return;
  }
  box.textContent = err.message ?? String(err);
  box.hidden = false;
}

/** One API call; a non-2xx answer throws with the server's {error, details}. */
async function api(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: { authorization: `Bearer ${state.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  const json = text ? JSON.parse(text) : null;
  if (!res.ok) {
    const e = new Error(`${res.status} ${json?.error ?? res.statusText}${json?.details ? `: ${json.details}` : ''}`);
    e.status = res.status;
    throw e;
  }
  return json;
}

const fmtTime = (iso) => (iso ? new Date(iso).toLocaleString() : '—');

// ---- connect -------------------------------------------------------------------------------

async function connect() {
  showError(null);
  // Any list proves the key; key management answers 403 to a scoped key, which tells them apart.
  await api('POST', '/v3/documents/list', { limit: 1 });
  try {
    await api('GET', '/v3/auth/scoped-key');
    state.admin = true;
  } catch (err) {
    if (err.status !== 403) throw err;
    state.admin = false;
  }
  sessionStorage.setItem('memstream.key', state.key);
  $('#who').textContent = state.admin ? 'admin key' : 'scoped key';
  $('#tabs').hidden = false;
  document.querySelector('[data-tab="keys"]').hidden = !state.admin;
  openTab('documents');
  await loadDocuments();
  followEvents();
  if (state.admin) await loadKeys();
}

$('#login').addEventListener('submit', (e) => {
  e.preventDefault();
  state.key = $('#key').value.trim();
  connect().catch((err) => {
    $('#who').textContent = 'not connected';
    showError(err);
  });
});

function openTab(name) {
  for (const b of document.querySelectorAll('#tabs button')) b.classList.toggle('active', b.dataset.tab === name);
  for (const s of document.querySelectorAll('main > section')) s.hidden = s.id !== `tab-${name}`;
}
for (const b of document.querySelectorAll('#tabs button')) b.addEventListener('click', () => openTab(b.dataset.tab));

// ---- documents -----------------------------------------------------------------------------

function docFilter() {
  const tag = $('#filter-tag').value.trim();
  const status = $('#filter-status').value;
  return { tag, status };
}

function statusCell(status) {
  return el('td', { class: `status status-${status}` }, status);
}

function docRow(d) {
  return el(
    'tr',
    { dataset: { id: d.id }, onclick: () => showDetail(d.id) },
    el('td', {}, d.title ?? d.customId ?? d.id),
    statusCell(d.status),
    el('td', {}, d.containerTags.join(', ')),
    el('td', {}, d.type),
    el('td', { class: 'muted' }, fmtTime(d.updatedAt)),
  );
}

async function loadDocuments() {
  const { tag, status } = docFilter();
  const body = { limit: 100, sort: 'updatedAt', order: 'desc', ...(tag ? { containerTags: [tag] } : {}), ...(status ? { statuses: [status] } : {}) };
  try {
    const r = await api('POST', '/v3/documents/list', body);
    const tbody = $('#docs tbody');
    tbody.replaceChildren(...r.memories.map(docRow));
    if (state.selected) tbody.querySelector(`tr[data-id="${state.selected}"]`)?.classList.add('selected');
    $('#doc-count').textContent = `${r.pagination.totalItems} document${r.pagination.totalItems === 1 ? '' : 's'}`;
    $('#docs-more').textContent = r.pagination.totalItems > r.memories.length ? `showing the ${r.memories.length} most recently changed` : '';
    showError(null);
  } catch (err) {
    showError(err);
  }
}

$('#doc-filters').addEventListener('submit', (e) => {
  e.preventDefault();
  loadDocuments();
  followEvents();
});

/** A new document, or one that left the filter: the list is read again, at most every 500 ms. */
function refreshSoon() {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(() => {
    state.refreshTimer = null;
    loadDocuments();
  }, 500);
}

function onTransition(ev) {
  const row = $(`#docs tbody tr[data-id="${ev.documentId}"]`);
  const { status } = docFilter();
  if (row && (!status || status === ev.status)) {
    row.children[1].replaceWith(statusCell(ev.status));
  } else {
    refreshSoon();
  }
  if (state.selected === ev.documentId) showDetail(ev.documentId);
}

/**
 * Live statuses from GET /v3/events. EventSource cannot send an Authorization header, so the
 * stream is read with fetch; on a drop it reconnects with Last-Event-ID.
 */
async function followEvents() {
  state.events?.abort();
  const ctl = new AbortController();
  state.events = ctl;
  const { tag } = docFilter();
  let lastId = null;
  const live = $('#live');
  while (!ctl.signal.aborted) {
    try {
      const res = await fetch(`/v3/events${tag ? `?containerTag=${encodeURIComponent(tag)}` : ''}`, {
        headers: { authorization: `Bearer ${state.key}`, ...(lastId ? { 'last-event-id': lastId } : {}) },
        signal: ctl.signal,
      });
      if (!res.ok) throw new Error(`events: ${res.status}`);
      live.textContent = '● live';
      live.className = 'live-on';
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let cut;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          let data = '';
          for (const line of block.split('\n')) {
            if (line.startsWith('id: ')) lastId = line.slice(4);
            else if (line.startsWith('data: ')) data += line.slice(6);
          }
          if (data) onTransition(JSON.parse(data));
        }
      }
    } catch (err) {
      if (ctl.signal.aborted) return;
    }
    live.textContent = '○ reconnecting';
    live.className = 'muted';
    await new Promise((r) => setTimeout(r, 1500));
  }
}

async function showDetail(id) {
  state.selected = id;
  for (const tr of document.querySelectorAll('#docs tbody tr')) tr.classList.toggle('selected', tr.dataset.id === id);
  try {
    const [doc, tl] = await Promise.all([api('GET', `/v3/documents/${id}`), api('GET', `/v3/documents/${id}/timeline`)]);
    $('#detail').hidden = false;
    $('#detail-title').textContent = doc.title ?? doc.customId ?? doc.id;
    $('#detail-id').textContent = `${doc.id} · ${doc.status} · ${doc.chunkCount} chunks · ${doc.containerTags.join(', ') || 'no tags'}`;
    const reason = $('#reason');
    reason.hidden = doc.status !== 'failed';
    reason.textContent = doc.error ? `failed in ${doc.error.stage} (${doc.error.class}): ${doc.error.reason}` : (doc.reason ?? '');
    $('#retry').hidden = doc.status !== 'failed';
    const longest = Math.max(1, ...tl.events.map((e) => e.sincePreviousMs ?? 0));
    $('#timeline').replaceChildren(
      ...tl.events.map((e) =>
        el(
          'li',
          {},
          `${e.type.replace(/^document\./, '').replace(/\.v\d+$/, '')}${e.status ? ` → ${e.status}` : ''} (rev ${e.revision})`,
          el('span', { class: 'muted' }, e.sincePreviousMs === null ? ' · start' : ` · +${e.sincePreviousMs} ms`),
          el('span', { class: 'bar', style: `width:${Math.round(((e.sincePreviousMs ?? 0) / longest) * 120)}px` }),
        ),
      ),
    );
  } catch (err) {
    showError(err);
  }
}

$('#retry').addEventListener('click', async () => {
  try {
    await api('POST', `/v3/documents/${state.selected}/retry`);
    await showDetail(state.selected);
    refreshSoon();
  } catch (err) {
    showError(err);
  }
});

// ---- search playground ---------------------------------------------------------------------

function hit(score, text, meta) {
  return el('li', { class: 'hit' }, el('span', { class: 'score' }, score.toFixed(3)), el('span', {}, text), el('div', { class: 'muted' }, meta));
}

$('#search-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const q = $('#q').value.trim();
  const tag = $('#search-tag').value.trim();
  const limit = Number($('#search-limit').value) || 10;
  const searchMode = $('#search-mode').value;
  const both = await Promise.allSettled([
    api('POST', '/v3/search', { q, limit, ...(tag ? { containerTags: [tag] } : {}) }),
    api('POST', '/v4/search', { q, limit, searchMode, ...(tag ? { containerTag: tag } : {}) }),
  ]);
  const [v3, v4] = both;
  if (v3.status === 'fulfilled') {
    $('#v3-meta').textContent = `${v3.value.total} in ${v3.value.timing} ms`;
    $('#v3-results').replaceChildren(...v3.value.results.map((r) => hit(r.score, r.chunks.map((c) => c.content).join(' … '), `${r.title ?? r.documentId} · ${r.documentId}`)));
  } else {
    $('#v3-meta').textContent = '';
    $('#v3-results').replaceChildren(el('li', { class: 'bad' }, v3.reason.message));
  }
  if (v4.status === 'fulfilled') {
    $('#v4-meta').textContent = `${v4.value.total} in ${v4.value.timing} ms`;
    $('#v4-results').replaceChildren(...v4.value.results.map((r) => hit(r.similarity, r.memory ?? r.chunk ?? '', `${r.documents?.[0]?.title ?? ''} · ${r.id}`)));
  } else {
    $('#v4-meta').textContent = '';
    $('#v4-results').replaceChildren(el('li', { class: 'bad' }, v4.reason.message));
  }
});

// ---- API keys ------------------------------------------------------------------------------

async function loadKeys() {
  try {
    const { keys } = await api('GET', '/v3/auth/scoped-key');
    $('#keys tbody').replaceChildren(
      ...keys.map((k) =>
        el(
          'tr',
          { dataset: { id: k.id } },
          el('td', {}, k.name),
          el('td', { class: 'muted' }, k.id),
          el('td', {}, k.containerTags.join(', ')),
          el('td', {}, k.expiresAt ? fmtTime(k.expiresAt) : 'never'),
          el('td', { class: `state ${k.revoked ? 'bad' : ''}` }, k.revoked ? 'revoked' : 'active'),
          el('td', {}, k.revoked ? '' : el('button', { class: 'revoke', onclick: () => revoke(k.id) }, 'Revoke')),
        ),
      ),
    );
  } catch (err) {
    showError(err);
  }
}

async function revoke(id) {
  try {
    await api('DELETE', `/v3/auth/scoped-key/${encodeURIComponent(id)}`);
    await loadKeys();
  } catch (err) {
    showError(err);
  }
}

$('#key-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const containerTags = $('#key-tags').value.split(',').map((s) => s.trim()).filter(Boolean);
  const name = $('#key-name').value.trim();
  const days = $('#key-days').value;
  try {
    const k = await api('POST', '/v3/auth/scoped-key', { containerTags, ...(name ? { name } : {}), ...(days ? { expiresInDays: Number(days) } : {}) });
    $('#new-key').hidden = false;
    $('#new-key code').textContent = k.key;
    showError(null);
    await loadKeys();
  } catch (err) {
    showError(err);
  }
});

// A key from earlier in this tab: connect again without asking.
if (state.key) {
  $('#key').value = state.key;
  connect().catch(showError);
}
