// The quota meter and the request log. Everything they show about the quota
// comes from the response headers of the page's own requests:
// RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers),
// X-RateLimit-Cost, X-Quota-Status, X-Tile-Cache and, on 429, Retry-After.

/**
 * Parses a list of the form `"burst";q=100;w=5, "minute";q=600;w=60` into
 * items with a name and integer parameters.
 * @param {string | null} header
 * @return {Array<{name: string, params: Object<string, number>}>}
 */
export function parseLimits(header) {
  if (!header) {
    return [];
  }
  const items = [];
  for (const item of header.split(',')) {
    const [first, ...params] = item.trim().split(';');
    const name = first.trim().replace(/^"(.*)"$/, '$1');
    if (!name) {
      continue;
    }
    const p = {};
    for (const kv of params) {
      const [k, v] = kv.trim().split('=');
      const n = Number(v);
      if (k && Number.isFinite(n)) {
        p[k] = n;
      }
    }
    items.push({name, params: p});
  }
  return items;
}

const maxLogRows = 60;

export class Meter {
  /**
   * @param {Object} opts
   * @param {() => void} opts.onRetry called when a Retry-After countdown ends
   */
  constructor({onRetry}) {
    this.onRetry = onRetry;
    this.el = {
      limits: document.getElementById('limits'),
      status: document.getElementById('plan-status'),
      lastCost: document.getElementById('last-cost'),
      lastWhat: document.getElementById('last-what'),
      retry: document.getElementById('retry'),
      retryLimit: document.getElementById('retry-limit'),
      retrySeconds: document.getElementById('retry-seconds'),
      log: document.getElementById('log'),
    };
    /** @type {number} when the current 429 countdown ends, in ms since the epoch */
    this.retryAt = 0;
    this.timer = 0;
  }

  /**
   * Shows what one exchange says about the quota, and logs it.
   * @param {import('./api.js').Exchange} x
   */
  update(x) {
    const res = x.response;
    if (!res) {
      this.log(x.label, 'network error', '', 'error');
      return;
    }
    const h = res.headers;
    const policy = parseLimits(h.get('RateLimit-Policy'));
    const state = new Map(parseLimits(h.get('RateLimit')).map((l) => [l.name, l.params]));
    if (policy.length > 0) {
      this.renderLimits(policy, state);
    }
    const quotaStatus = h.get('X-Quota-Status');
    if (policy.length > 0) {
      // Only the unusual ones: unmetered (the quota store failed and the
      // server serves anyway) or shadow-denied (it would have said 429).
      this.el.status.textContent = quotaStatus && quotaStatus !== 'charged' ? quotaStatus : '';
    }
    const cost = h.get('X-RateLimit-Cost');
    const cache = h.get('X-Tile-Cache');
    let status = String(res.status);
    if (cache) {
      status += ' ' + cache;
    }
    const charged = res.ok && quotaStatus === 'charged';
    if (cost !== null && cost !== '0') {
      this.el.lastCost.textContent = `${cost} unit${cost === '1' ? '' : 's'}`;
      this.el.lastWhat.textContent = `${x.label}: ${status}${charged ? '' : ', not charged'}`;
    }
    if (res.status === 429) {
      const seconds = Number(h.get('Retry-After'));
      this.countdown(Number.isFinite(seconds) ? seconds : 1, x.problem?.limit ?? null);
    }
    let note = cost ?? '';
    if (x.problem && res.status !== 429) {
      note = x.problem.code || '';
      if (x.problem.max_radius_m) {
        note += ` (max ${x.problem.max_radius_m} m)`;
      } else if (x.problem.lowest_zoom !== undefined) {
        note += ` (zoom ≥ ${x.problem.lowest_zoom})`;
      }
    }
    this.log(x.label, status, note, res.ok ? (cache || 'ok').toLowerCase() : 'denied');
  }

  /**
   * Draws one bar per limit: the units left of its maximum.
   * @param {Array<{name: string, params: Object<string, number>}>} policy
   * @param {Map<string, Object<string, number>>} state
   */
  renderLimits(policy, state) {
    const rows = policy.map(({name, params}) => {
      const q = params.q ?? 0;
      const r = state.get(name)?.r ?? q;
      const t = state.get(name)?.t ?? 0;
      const share = q > 0 ? Math.max(0, Math.min(1, r / q)) : 0;
      const row = document.createElement('div');
      row.className = 'limit' + (share < 0.2 ? ' low' : '');
      row.dataset.limit = name;
      row.dataset.remaining = String(r);
      row.innerHTML = `<div class="limit-head"><b></b><span><b class="remaining"></b> of <span class="max"></span> left</span></div>
        <div class="bar" role="meter" aria-valuemin="0"><div></div></div>
        <div class="muted window"></div>`;
      row.querySelector('.limit-head > b').textContent = name;
      row.querySelector('.remaining').textContent = String(r);
      row.querySelector('.max').textContent = String(q);
      const bar = row.querySelector('.bar');
      bar.setAttribute('aria-valuemax', String(q));
      bar.setAttribute('aria-valuenow', String(r));
      bar.firstElementChild.style.width = `${(share * 100).toFixed(1)}%`;
      row.querySelector('.window').textContent =
        `units per ${params.w ?? '?'} s` + (r < q && t > 0 ? ` · oldest charge leaves in ${t} s` : '');
      return row;
    });
    this.el.limits.replaceChildren(...rows);
  }

  /** @return {boolean} whether a Retry-After is running */
  waiting() {
    return this.retryAt > Date.now();
  }

  /**
   * Starts, or extends, the countdown of a 429.
   * @param {number} seconds Retry-After
   * @param {string | null} limit the limit that denied
   */
  countdown(seconds, limit) {
    this.retryAt = Math.max(this.retryAt, Date.now() + seconds * 1000);
    this.el.retryLimit.textContent = limit || '';
    this.el.retry.hidden = false;
    if (this.timer) {
      return;
    }
    const tick = () => {
      const left = this.retryAt - Date.now();
      if (left <= 0) {
        clearInterval(this.timer);
        this.timer = 0;
        this.retryAt = 0;
        this.el.retry.hidden = true;
        this.onRetry();
        return;
      }
      this.el.retrySeconds.textContent = (left / 1000).toFixed(1);
    };
    tick();
    this.timer = setInterval(tick, 100);
  }

  /**
   * Adds a row to the request log, newest first.
   * @param {string} label
   * @param {string} status
   * @param {string} cost
   * @param {string} kind a class for the row
   */
  log(label, status, cost, kind) {
    const tr = document.createElement('tr');
    tr.className = kind;
    for (const [text, cls] of [[label, ''], [status, 'status'], [cost, 'num']]) {
      const td = document.createElement('td');
      td.textContent = text;
      if (cls) {
        td.className = cls;
      }
      tr.append(td);
    }
    this.el.log.prepend(tr);
    while (this.el.log.childElementCount > maxLogRows) {
      this.el.log.lastElementChild.remove();
    }
  }
}
