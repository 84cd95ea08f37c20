// The demo page of tileapi: our vector tiles on an OpenLayers map, radius and
// containment queries on click, and a quota meter fed by response headers.
import 'ol/ol.css';
import '../style.css';

import Feature from 'ol/Feature.js';
import Map from 'ol/Map.js';
import TileState from 'ol/TileState.js';
import View from 'ol/View.js';
import {ScaleLine, defaults as defaultControls} from 'ol/control.js';
import GeoJSON from 'ol/format/GeoJSON.js';
import MVT from 'ol/format/MVT.js';
import Point from 'ol/geom/Point.js';
import {circular} from 'ol/geom/Polygon.js';
import VectorLayer from 'ol/layer/Vector.js';
import VectorTileLayer from 'ol/layer/VectorTile.js';
import {fromLonLat, toLonLat} from 'ol/proj.js';
import VectorSource from 'ol/source/Vector.js';
import VectorTileSource from 'ol/source/VectorTile.js';
import {Circle, Fill, Stroke, Style, Text} from 'ol/style.js';

import {Client} from './api.js';
import {Meter} from './meter.js';
import {UsageChart} from './usage.js';

const keyInput = /** @type {HTMLInputElement} */ (document.getElementById('key'));
const radiusInput = /** @type {HTMLInputElement} */ (document.getElementById('radius'));
const radiusValue = document.getElementById('radius-value');

const api = new Client(() => keyInput.value.trim());

/**
 * Loads of tiles that were denied (429) or held back while a Retry-After
 * runs, run again when it is over. OpenLayers draws a tile that goes from
 * error to loaded.
 * @type {Set<() => void>}
 */
const retries = new Set();
const meter = new Meter({
  onRetry() {
    const pending = [...retries];
    retries.clear();
    for (const load of pending) {
      load();
    }
  },
});
api.subscribe((x) => meter.update(x));

const attribution =
  'Places: <a href="https://www.geonames.org/">GeoNames</a> (CC BY 4.0); ' +
  'countries: Natural Earth; counties: US Census Bureau';

/**
 * A source of one of our tile layers. Tiles are fetched by the API client,
 * so they carry the key header and their quota headers reach the meter.
 * @param {string} layer
 * @param {number} minZoom
 * @param {number} maxZoom
 */
function tileSource(layer, minZoom, maxZoom) {
  return new VectorTileSource({
    format: new MVT(),
    url: `/v1/tiles/${layer}/{z}/{x}/{y}.mvt`,
    minZoom,
    maxZoom,
    attributions: attribution,
    tileLoadFunction(tile, url) {
      const vt = /** @type {import('ol/VectorTile.js').default} */ (tile);
      const [z, x, y] = vt.getTileCoord();
      vt.setLoader((extent, _resolution, projection) => {
        const load = () => {
          if (meter.waiting()) {
            // Asking now would only be denied: wait for the Retry-After.
            retries.add(retry);
            vt.onError();
            return;
          }
          api
            .get(url, `tile ${layer} ${z}/${x}/${y}`)
            .then(async (res) => {
              if (res.status === 429) {
                retries.add(retry);
              }
              if (!res.ok) {
                vt.onError();
                return;
              }
              const features = vt.getFormat().readFeatures(await res.arrayBuffer(), {extent, featureProjection: projection});
              vt.setFeatures(features);
            })
            .catch(() => vt.onError());
        };
        // A retry loads the tile only if it is still wanted: a tile
        // dropped from the map's cache is no longer in error.
        const retry = () => {
          if (vt.getState() === TileState.ERROR) {
            load();
          }
        };
        load();
      });
    },
  });
}

const countryStyle = new Style({
  fill: new Fill({color: '#f4f1e8'}),
  stroke: new Stroke({color: '#8c8a80', width: 1}),
});
const countyStyle = new Style({stroke: new Stroke({color: '#c2a77e', width: 0.7})});

/** One style per dot size, its text set for each feature as it is drawn. */
const placeStyles = [2, 3, 4, 5].map(
  (size) =>
    new Style({
      image: new Circle({radius: size, fill: new Fill({color: '#3b3b3b'}), stroke: new Stroke({color: '#fff', width: 1})}),
      text: new Text({
        font: `${size >= 4 ? '600 ' : ''}12px sans-serif`,
        offsetY: -11,
        fill: new Fill({color: '#222'}),
        stroke: new Stroke({color: 'rgba(255, 255, 255, 0.9)', width: 3}),
      }),
    }),
);
function placeStyle(feature, resolution) {
  const pop = Number(feature.get('population')) || 0;
  const size = pop >= 1e6 ? 5 : pop >= 1e5 ? 4 : pop >= 1e4 ? 3 : 2;
  // Names of small places only when zoomed in; declutter hides overlaps.
  const labelled = pop >= 1e5 || resolution < 40 || (pop >= 1e4 && resolution < 150);
  const style = placeStyles[size - 2];
  style.getText().setText(labelled ? String(feature.get('name') ?? '') : '');
  return style;
}

const layers = {
  countries: new VectorTileLayer({source: tileSource('countries', 0, 10), style: countryStyle}),
  // Counties start at tile zoom 3, view zoom 4 with 512-pixel tiles.
  counties: new VectorTileLayer({source: tileSource('counties', 3, 14), style: countyStyle, minZoom: 4}),
  places: new VectorTileLayer({source: tileSource('places', 0, 14), style: placeStyle, declutter: true}),
};

// The radius query: its circle and the fences containing the point under
// the places, and the places found over them.
const areas = new VectorSource();
const found = new VectorSource();
const areaStyles = {
  circle: new Style({
    fill: new Fill({color: 'rgba(214, 48, 49, 0.08)'}),
    stroke: new Stroke({color: '#d63031', width: 2}),
  }),
  fence: new Style({stroke: new Stroke({color: '#2767d8', width: 2.5, lineDash: [6, 4]})}),
};
const foundStyles = {
  found: new Style({
    image: new Circle({radius: 5, fill: new Fill({color: '#d63031'}), stroke: new Stroke({color: '#fff', width: 1.5})}),
  }),
  center: new Style({
    image: new Circle({radius: 4, fill: new Fill({color: '#fff'}), stroke: new Stroke({color: '#d63031', width: 2})}),
  }),
};
const areaLayer = new VectorLayer({source: areas, style: (f) => areaStyles[f.get('role')]});
const foundLayer = new VectorLayer({source: found, style: (f) => foundStyles[f.get('role')]});

const map = new Map({
  target: 'map',
  layers: [layers.countries, layers.counties, areaLayer, layers.places, foundLayer],
  controls: defaultControls({attributionOptions: {collapsible: false}}).extend([new ScaleLine()]),
  view: new View({center: fromLonLat([-122.16, 37.72]), zoom: 11, minZoom: 1, maxZoom: 16}),
});

for (const box of document.querySelectorAll('input[name=layer]')) {
  const input = /** @type {HTMLInputElement} */ (box);
  input.addEventListener('change', () => layers[input.value].setVisible(input.checked));
}

function showRadius() {
  const m = Number(radiusInput.value);
  radiusValue.textContent = m < 1000 ? `${m} m` : `${m / 1000} km`;
}
radiusInput.addEventListener('input', showRadius);
showRadius();

const geojson = new GeoJSON({featureProjection: 'EPSG:3857'});
/** The most places a radius query asks for. */
const withinLimit = 200;

map.on('singleclick', async (evt) => {
  const [lng, lat] = toLonLat(evt.coordinate);
  const radius = Number(radiusInput.value);
  const circle = new Feature({role: 'circle', geometry: circular([lng, lat], radius, 128).transform('EPSG:4326', 'EPSG:3857')});
  const center = new Feature({role: 'center', geometry: new Point(fromLonLat([lng, lat]))});
  areas.clear();
  found.clear();
  areas.addFeature(circle);
  found.addFeature(center);
  const at = `lng=${lng.toFixed(5)}&lat=${lat.toFixed(5)}`;
  const km = radiusValue.textContent;
  // One after the other, so the meter ends on the state after both.
  try {
    await showFound(await api.get(`/v1/geofence/within?${at}&radius=${radius}&limit=${withinLimit}`, `within ${km}`));
    await showFences(await api.get(`/v1/geofence/contains?${at}&geometry=true`, 'contains'));
  } catch {
    // The request log shows the network error.
  }
});

const resultsBox = document.getElementById('results');
const foundCount = document.getElementById('found-count');
const foundList = document.getElementById('found');
const fencesBox = document.getElementById('fences');

/** @param {Response} res */
async function showFound(res) {
  resultsBox.hidden = false;
  const body = await res.json();
  if (!res.ok) {
    foundCount.textContent = `${res.status}: ${body.detail || body.title}`;
    foundList.replaceChildren();
    return;
  }
  const features = geojson.readFeatures(body);
  for (const f of features) {
    f.set('role', 'found');
  }
  found.addFeatures(features);
  foundCount.textContent = features.length < withinLimit ? String(features.length) : `${withinLimit} (the most asked for)`;
  foundList.replaceChildren(
    ...features.slice(0, 8).map((f) => {
      const li = document.createElement('li');
      li.textContent = `${f.get('name')} · ${(f.get('distance') / 1000).toFixed(1)} km`;
      return li;
    }),
  );
}

/** @param {Response} res */
async function showFences(res) {
  resultsBox.hidden = false;
  const body = await res.json();
  if (!res.ok) {
    fencesBox.textContent = `${res.status}: ${body.detail || body.title}`;
    return;
  }
  const features = geojson.readFeatures(body);
  for (const f of features) {
    f.set('role', 'fence');
  }
  areas.addFeatures(features);
  fencesBox.textContent = features.length
    ? features.map((f) => `${f.get('name')} (${f.get('kind')})`).join(' · ')
    : 'no fence (open sea?)';
}

const usageChart = new UsageChart(api);

/**
 * Reads the key's usage (not charged) so the meter starts full or where it
 * was, and its last day's history for the chart.
 */
function peekQuota() {
  api.get('/v1/quota', 'quota').catch(() => {});
  usageChart.refresh();
}
// The chart follows the history, which is written behind the requests.
setInterval(() => usageChart.refresh(), 15000);

keyInput.addEventListener('change', () => {
  areas.clear();
  found.clear();
  resultsBox.hidden = true;
  retries.clear();
  for (const layer of Object.values(layers)) {
    layer.getSource().refresh();
  }
  peekQuota();
});
peekQuota();
