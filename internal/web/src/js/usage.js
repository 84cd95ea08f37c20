// The usage chart: the key's units as settled per hour over the last day,
// stacked by layer (or geofence set), from GET /v1/usage, which is not
// charged. The history is written a second or so behind the requests.

const hours = 24;
const width = 240;
const height = 80;
const svgNS = 'http://www.w3.org/2000/svg';
const colours = ['#3b6ea8', '#d9822b', '#4c9a5b', '#a8443b', '#7d5ba6', '#8c6d46'];

/**
 * Sums the rows of a /v1/usage answer (by hour, grouped by layer) into
 * units per series and hour: a tile layer by its name, a geofence set with
 * its route ("places (within)"), a route of neither by the route's name.
 * @param {Array<{start: string, route?: string, layer?: string, units_settled: number}>} rows
 * @param {number} from the first hour, in ms since the epoch
 * @return {Map<string, number[]>}
 */
export function series(rows, from) {
  const out = new Map();
  for (const r of rows) {
    const i = Math.floor((Date.parse(r.start) - from) / 3600e3);
    if (i < 0 || i >= hours) {
      continue;
    }
    const name = r.route === 'tile' ? r.layer : r.layer ? `${r.layer} (${r.route})` : r.route;
    if (!out.has(name)) {
      out.set(name, new Array(hours).fill(0));
    }
    out.get(name)[i] += r.units_settled;
  }
  return out;
}

export class UsageChart {
  /** @param {import('./api.js').Client} api */
  constructor(api) {
    this.api = api;
    this.svg = document.getElementById('usage-chart');
    this.legend = document.getElementById('usage-legend');
    this.total = document.getElementById('usage-total');
  }

  /** Reads the last day's usage and draws it; a key-less page shows why not. */
  async refresh() {
    const to = new Date(Math.ceil(Date.now() / 3600e3) * 3600e3);
    const from = new Date(to.getTime() - hours * 3600e3);
    const url = `/v1/usage?by=hour&group=layer&from=${from.toISOString().replace(/\.\d+Z$/, 'Z')}&to=${to.toISOString().replace(/\.\d+Z$/, 'Z')}`;
    let res;
    try {
      res = await this.api.get(url, 'usage');
    } catch {
      return;
    }
    const body = await res.json().catch(() => null);
    if (!res.ok || !body) {
      this.draw(new Map());
      this.total.textContent = body && body.title ? `(${body.title})` : '';
      return;
    }
    this.draw(series(body.rows, from.getTime()));
    this.total.textContent = `${body.total.units_settled} units, ${body.total.requests} requests`;
  }

  /** @param {Map<string, number[]>} s */
  draw(s) {
    this.svg.replaceChildren();
    this.legend.replaceChildren();
    let top = 1;
    for (let i = 0; i < hours; i++) {
      let sum = 0;
      for (const v of s.values()) {
        sum += v[i];
      }
      top = Math.max(top, sum);
    }
    const bar = width / hours;
    const base = new Array(hours).fill(0);
    [...s.keys()].sort().forEach((name, k) => {
      const colour = colours[k % colours.length];
      s.get(name).forEach((v, i) => {
        if (v <= 0) {
          return;
        }
        const h = (v / top) * (height - 2);
        const rect = document.createElementNS(svgNS, 'rect');
        rect.setAttribute('x', String(i * bar + 1));
        rect.setAttribute('width', String(bar - 2));
        rect.setAttribute('y', String(height - base[i] - h));
        rect.setAttribute('height', String(h));
        rect.setAttribute('fill', colour);
        const title = document.createElementNS(svgNS, 'title');
        title.textContent = `${name}: ${v} units`;
        rect.append(title);
        this.svg.append(rect);
        base[i] += h;
      });
      const item = document.createElement('span');
      item.className = 'swatch';
      item.style.setProperty('--swatch', colour);
      item.textContent = name;
      this.legend.append(item);
    });
  }
}
