// Builds the demo page into ../dist/assets: app.js and app.css, minified,
// and licenses.txt, the licence of every npm package bundled into them.
import {readFileSync, readdirSync, rmSync, writeFileSync} from 'node:fs';
import {dirname, join} from 'node:path';
import {fileURLToPath} from 'node:url';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', 'dist', 'assets');
rmSync(out, {recursive: true, force: true});

const result = await esbuild.build({
  entryPoints: {app: join(here, 'js', 'main.js')},
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022'],
  outdir: out,
  metafile: true,
  legalComments: 'none',
  logLevel: 'info',
});

// The packages whose code went into the bundle, with their licence texts.
const packages = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (m) {
    packages.add(m[1]);
  }
}
const notices = [...packages].sort().map((name) => {
  const dir = join(here, 'node_modules', name);
  const {version, license} = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const file = readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
  const text = file ? readFileSync(join(dir, file), 'utf8').trim() : `(${license}; no licence file in the package)`;
  return `${name} ${version} (${license})\n\n${text}\n`;
});
writeFileSync(join(out, 'licenses.txt'), notices.join('\n' + '-'.repeat(72) + '\n\n'));
console.log(`bundled ${packages.size} packages: ${[...packages].sort().join(', ')}`);
