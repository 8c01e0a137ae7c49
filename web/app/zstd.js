// A small Zstandard decoder (RFC 8878), enough for the per-step record of a
// long-run job (zstd+base64 in the job result) without a library: frames, raw,
// RLE and compressed blocks, Huffman literals (1 or 4 streams), FSE sequences
// with predefined, RLE, compressed and repeated tables. No dictionaries.
// Section numbers below are RFC 8878's.

// Backward bit stream (§4.1, §4.2.2): the last byte holds a 1 marking its
// start; bits are read from the top down, reads past the start give zeros.
class Back {
  constructor(d, start, end) {
    if (end <= start || d[end - 1] === 0) throw new Error('zstd: bad bit stream end');
    this.d = d; this.s = start;
    this.pos = (end - start - 1) * 8 + (31 - Math.clz32(d[end - 1]));
  }
  read(n) {
    let v = 0;
    for (let i = 1; i <= n; i++) {
      const k = this.pos - i;
      v = v * 2 + (k >= 0 ? (this.d[this.s + (k >> 3)] >> (k & 7)) & 1 : 0);
    }
    this.pos -= n;
    return v;
  }
}

// FSE table description (§4.1.1), read forward from byte p; returns the
// decoding table and the first byte after the description.
function readFse(d, p, maxSymbols, maxLog) {
  let bit = 0;
  const peek = (n) => {
    let v = 0;
    for (let i = n - 1; i >= 0; i--) {
      const k = bit + i;
      v = v * 2 + ((d[p + (k >> 3)] >> (k & 7)) & 1);
    }
    return v;
  };
  const take = (n) => { const v = peek(n); bit += n; return v; };
  const log = take(4) + 5;
  if (log > maxLog) throw new Error('zstd: FSE accuracy too large');
  const norm = [];
  let remaining = (1 << log) + 1, threshold = 1 << log, nb = log + 1;
  while (remaining > 1 && norm.length < maxSymbols) {
    const max = 2 * threshold - 1 - remaining;
    const v = peek(nb);
    let c;
    if ((v & (threshold - 1)) < max) { c = v & (threshold - 1); bit += nb - 1; } else {
      c = v & (2 * threshold - 1);
      if (c >= threshold) c -= max;
      bit += nb;
    }
    c--;
    remaining -= Math.abs(c);
    norm.push(c);
    if (c === 0) {
      for (;;) {
        const r = take(2);
        for (let i = 0; i < r; i++) norm.push(0);
        if (r !== 3) break;
      }
    }
    while (remaining < threshold && threshold > 1) { nb--; threshold >>= 1; }
  }
  if (remaining !== 1) throw new Error('zstd: bad FSE distribution');
  return {table: fseTable(norm, log), next: p + ((bit + 7) >> 3)};
}

// Decoding table from normalized counts (§4.1.1): symbol, bits, base per state.
function fseTable(norm, log) {
  const size = 1 << log;
  const sym = new Array(size).fill(0), next = [];
  let high = size - 1;
  norm.forEach((c, s) => {
    if (c === -1) { sym[high--] = s; next[s] = 1; } else next[s] = c;
  });
  const step = (size >> 1) + (size >> 3) + 3, mask = size - 1;
  let pos = 0;
  norm.forEach((c, s) => {
    for (let i = 0; i < c; i++) {
      sym[pos] = s;
      do pos = (pos + step) & mask; while (pos > high);
    }
  });
  return {log, e: sym.map((s) => {
    const x = next[s]++;
    const bits = log - (31 - Math.clz32(x));
    return {s, bits, base: (x << bits) - size};
  })};
}

function rleTable(s) { return {log: 0, e: [{s, bits: 0, base: 0}]}; }

// Predefined distributions (§3.1.1.3.2.2).
const LL_NORM = [4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1,
  -1, -1, -1, -1];
const ML_NORM = [1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1];
const OF_NORM = [1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1];
const LL_BASE = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 22, 24, 28, 32, 40, 48, 64,
  128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536];
const LL_BITS = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11,
  12, 13, 14, 15, 16];
const ML_BASE = [];
const ML_BITS = [];
for (let i = 0; i < 32; i++) { ML_BASE.push(i + 3); ML_BITS.push(0); }
[[35, 1], [37, 1], [39, 1], [41, 1], [43, 2], [47, 2], [51, 3], [59, 3], [67, 4], [83, 4], [99, 5], [131, 7],
  [259, 8], [515, 9], [1027, 10], [2051, 11], [4099, 12], [8195, 13], [16387, 14], [32771, 15], [65539, 16]]
  .forEach(([b, n]) => { ML_BASE.push(b); ML_BITS.push(n); });

// Huffman tree description (§4.2.1): weights, direct or FSE-compressed.
function readHuffman(d, p) {
  const hb = d[p++];
  let w = [];
  if (hb >= 128) {
    const n = hb - 127;
    for (let i = 0; i < n; i++) w.push(i & 1 ? d[p + (i >> 1)] & 15 : d[p + (i >> 1)] >> 4);
    p += (n + 1) >> 1;
  } else {
    const {table, next} = readFse(d, p, 256, 6);
    const br = new Back(d, next, p + hb);
    let s1 = br.read(table.log), s2 = br.read(table.log);
    const upd = (s) => table.e[s].base + br.read(table.e[s].bits);
    for (;;) {
      w.push(table.e[s1].s); s1 = upd(s1);
      if (br.pos < 0) { w.push(table.e[s2].s); break; }
      w.push(table.e[s2].s); s2 = upd(s2);
      if (br.pos < 0) { w.push(table.e[s1].s); break; }
    }
    p += hb;
  }
  let sum = 0;
  for (const x of w) if (x) sum += 1 << (x - 1);
  const maxBits = 32 - Math.clz32(sum);
  const rest = (1 << maxBits) - sum;
  if (rest & (rest - 1)) throw new Error('zstd: bad Huffman weights');
  w = w.concat([31 - Math.clz32(rest) + 1]);
  const size = 1 << maxBits, sym = new Uint8Array(size), bits = new Uint8Array(size);
  let at = 0;
  for (let wt = 1; wt <= maxBits; wt++) {
    w.forEach((x, s) => {
      if (x !== wt) return;
      for (let i = 0; i < 1 << (wt - 1); i++, at++) { sym[at] = s; bits[at] = maxBits + 1 - wt; }
    });
  }
  return {tree: {maxBits, sym, bits}, next: p};
}

function huffStream(tree, d, start, end, n, out) {
  const br = new Back(d, start, end);
  for (let i = 0; i < n; i++) {
    const k = br.read(tree.maxBits);
    out.push(tree.sym[k]);
    br.pos += tree.maxBits - tree.bits[k];
  }
}

// Literals section (§3.1.1.3.1).
function readLiterals(d, p, st) {
  const b0 = d[p], type = b0 & 3, fmt = (b0 >> 2) & 3;
  if (type < 2) {
    let n, hl;
    if (fmt === 0 || fmt === 2) { n = b0 >> 3; hl = 1; } else if (fmt === 1) { n = (b0 >> 4) + (d[p + 1] << 4); hl = 2; } else {
      n = (b0 >> 4) + (d[p + 1] << 4) + (d[p + 2] << 12); hl = 3;
    }
    p += hl;
    if (type === 0) return {lit: d.subarray(p, p + n), next: p + n};
    return {lit: new Uint8Array(n).fill(d[p]), next: p + 1};
  }
  const bitsEach = [10, 10, 14, 18][fmt], hl = [3, 3, 4, 5][fmt], streams = fmt === 0 ? 1 : 4;
  let hdr = 0;
  for (let i = hl - 1; i >= 0; i--) hdr = hdr * 256 + d[p + i];
  const mask = 2 ** bitsEach;
  const regen = Math.floor(hdr / 16) % mask, comp = Math.floor(hdr / 16 / mask) % mask;
  p += hl;
  const end = p + comp;
  if (type === 2) {
    const r = readHuffman(d, p);
    st.huf = r.tree;
    p = r.next;
  } else if (!st.huf) throw new Error('zstd: treeless literals without a table');
  const out = [];
  if (streams === 1) huffStream(st.huf, d, p, end, regen, out);
  else {
    const s1 = d[p] | (d[p + 1] << 8), s2 = d[p + 2] | (d[p + 3] << 8), s3 = d[p + 4] | (d[p + 5] << 8);
    const each = Math.floor((regen + 3) / 4);
    let q = p + 6;
    [s1, s2, s3, end - p - 6 - s1 - s2 - s3].forEach((sz, i) => {
      huffStream(st.huf, d, q, q + sz, i < 3 ? each : regen - 3 * each, out);
      q += sz;
    });
  }
  return {lit: Uint8Array.from(out), next: end};
}

function seqTable(mode, d, p, st, key, norm, log, maxLog, maxSym) {
  if (mode === 0) st[key] = fseTable(norm, log);
  else if (mode === 1) { st[key] = rleTable(d[p]); return p + 1; } else if (mode === 2) {
    const r = readFse(d, p, maxSym, maxLog);
    st[key] = r.table;
    return r.next;
  } else if (!st[key]) throw new Error('zstd: repeated table before any');
  return p;
}

// A compressed block (§3.1.1.3): literals, then sequences executed onto out.
function block(d, p, end, st, out) {
  const L = readLiterals(d, p, st);
  p = L.next;
  let n = d[p++];
  if (n >= 128) n = n === 255 ? d[p] + (d[p + 1] << 8) + 0x7f00 : ((n - 128) << 8) + d[p];
  if (n >= 128) p += d[p - 1] === 255 ? 2 : 1;
  let li = 0;
  if (n > 0) {
    const modes = d[p++];
    p = seqTable(modes >> 6, d, p, st, 'll', LL_NORM, 6, 9, 36);
    p = seqTable((modes >> 4) & 3, d, p, st, 'of', OF_NORM, 5, 8, 32);
    p = seqTable((modes >> 2) & 3, d, p, st, 'ml', ML_NORM, 6, 9, 53);
    const br = new Back(d, p, end);
    let sl = br.read(st.ll.log), so = br.read(st.of.log), sm = br.read(st.ml.log);
    const rep = st.rep;
    for (let i = 0; i < n; i++) {
      const oc = st.of.e[so].s, lc = st.ll.e[sl].s, mc = st.ml.e[sm].s;
      const ofv = 2 ** oc + br.read(oc);
      const ml = ML_BASE[mc] + br.read(ML_BITS[mc]);
      const ll = LL_BASE[lc] + br.read(LL_BITS[lc]);
      let off;
      if (ofv > 3) { off = ofv - 3; rep[2] = rep[1]; rep[1] = rep[0]; rep[0] = off; } else {
        const k = ofv - 1 + (ll === 0 ? 1 : 0);
        if (k === 0) off = rep[0];
        else {
          off = k === 3 ? rep[0] - 1 : rep[k];
          if (k !== 1) rep[2] = rep[1];
          rep[1] = rep[0];
          rep[0] = off;
        }
      }
      for (let j = 0; j < ll; j++) out.push(L.lit[li++]);
      const from = out.length - off;
      if (from < 0) throw new Error('zstd: offset before the start');
      for (let j = 0; j < ml; j++) out.push(out[from + j]);
      if (i < n - 1) {
        sl = st.ll.e[sl].base + br.read(st.ll.e[sl].bits);
        sm = st.ml.e[sm].base + br.read(st.ml.e[sm].bits);
        so = st.of.e[so].base + br.read(st.of.e[so].bits);
      }
    }
  }
  while (li < L.lit.length) out.push(L.lit[li++]);
}

// Decompresses every frame of a zstd stream (skippable frames skipped).
export function zstdDecompress(d) {
  const out = [];
  let p = 0;
  while (p < d.length) {
    const magic = (d[p] | (d[p + 1] << 8) | (d[p + 2] << 16) | (d[p + 3] << 24)) >>> 0;
    p += 4;
    if ((magic & 0xfffffff0) === 0x184d2a50) {
      p += 4 + (d[p] | (d[p + 1] << 8) | (d[p + 2] << 16) | (d[p + 3] << 24));
      continue;
    }
    if (magic !== 0xfd2fb528) throw new Error('zstd: not a zstd frame');
    const fhd = d[p++];
    const single = (fhd >> 5) & 1, fcsFlag = fhd >> 6, dictFlag = fhd & 3, checksum = (fhd >> 2) & 1;
    if (!single) p++;
    if (dictFlag) throw new Error('zstd: dictionaries are not supported');
    p += [fcsFlag === 0 && single ? 1 : 0, 2, 4, 8][fcsFlag];
    const st = {rep: [1, 4, 8]};
    for (;;) {
      const bh = d[p] | (d[p + 1] << 8) | (d[p + 2] << 16);
      p += 3;
      const last = bh & 1, type = (bh >> 1) & 3, size = bh >> 3;
      if (type === 0) { for (let i = 0; i < size; i++) out.push(d[p + i]); p += size; } else if (type === 1) {
        for (let i = 0; i < size; i++) out.push(d[p]);
        p += 1;
      } else if (type === 2) { block(d, p, p + size, st, out); p += size; } else throw new Error('zstd: reserved block type');
      if (last) break;
    }
    if (checksum) p += 4;
  }
  return Uint8Array.from(out);
}

export function base64Bytes(s) {
  const bin = atob(s);
  const b = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
  return b;
}
