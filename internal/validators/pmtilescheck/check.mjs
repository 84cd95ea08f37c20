// check.mjs reads a PMTiles archive with the pmtiles npm package (the
// reference reader, not the Go one tileapi wrote) and prints what it sees.
//
// Usage: node check.mjs ARCHIVE < TILES, where TILES is a JSON array of
// [z, x, y]. It prints one JSON object: {"header": the library's header,
// "metadata": the archive's JSON metadata, "tiles": [{"z", "x", "y",
// "sha256", "length"}]}, one for each tile asked for, in order, with the
// SHA-256 (hex) and the length of the tile's bytes as the library returns
// them (gzip undone), or a null sha256 and a length of 0 for a tile the
// archive does not have.
import { open } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { PMTiles } from 'pmtiles';

// FileSource is the library's Source over a local file: its own FileSource
// reads a browser File.
class FileSource {
  constructor(path, handle) {
    this.path = path;
    this.handle = handle;
  }

  getKey() {
    return this.path;
  }

  async getBytes(offset, length) {
    const buf = Buffer.alloc(length);
    const { bytesRead } = await this.handle.read(buf, 0, length, offset);
    return { data: buf.buffer.slice(buf.byteOffset, buf.byteOffset + bytesRead) };
  }
}

const path = process.argv[2];
const tiles = JSON.parse(readFileSync(0, 'utf8'));
const handle = await open(path, 'r');
try {
  const archive = new PMTiles(new FileSource(path, handle));
  const header = await archive.getHeader();
  const metadata = await archive.getMetadata();
  const out = [];
  for (const [z, x, y] of tiles) {
    const tile = await archive.getZxy(z, x, y);
    const data = tile ? new Uint8Array(tile.data) : null;
    out.push({
      z, x, y,
      sha256: data ? createHash('sha256').update(data).digest('hex') : null,
      length: data ? data.length : 0,
    });
  }
  process.stdout.write(JSON.stringify({ header, metadata, tiles: out }));
} finally {
  await handle.close();
}
