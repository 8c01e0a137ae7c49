// Bit patterns of values in numval's dtypes, encoded in the page from the number the
// API sent (a double, or "nan" / "inf" / "-inf" / a hex float) with
// round-to-nearest-even and no saturation, the way core/numerics/dtype.c encodes
// (IEEE 754-2019 §4.3.1 and §7.4; OFP8 for e4m3fn / e5m2; OCP MX v1.0 for fp6,
// fp4 and e8m0). A value the format cannot hold rounds like a conversion would:
// overflow gives inf (NaN for e4m3fn, max finite for fp6/fp4), NaN gives the
// quiet NaN (signed zero for fp6/fp4, which have none).
//
//   bitsHex(1, 'fp32')     -> '0x3f800000'
//   bitsHex(448, 'e4m3fn') -> '0x7e'
//   bitFields(1, 'bf16')   -> '0 01111111 0000000'
//
// Every function returns null for a dtype it does not know or a value it cannot read.

// special: 'ieee' (all-ones exponent: inf or NaN), 'fn' (only S.1111.111 is NaN, no
// inf: e4m3fn), 'none' (every encoding finite: MX fp6/fp4).
const BINARY = {
  fp32: {ebits: 8, mbits: 23, bias: 127, special: 'ieee'},
  tf32: {ebits: 8, mbits: 10, bias: 127, special: 'ieee', container: 32},
  bf16: {ebits: 8, mbits: 7, bias: 127, special: 'ieee'},
  fp16: {ebits: 5, mbits: 10, bias: 15, special: 'ieee'},
  fp8_e4m3: {ebits: 4, mbits: 3, bias: 7, special: 'fn'},
  fp8_e5m2: {ebits: 5, mbits: 2, bias: 15, special: 'ieee'},
  fp6_e2m3: {ebits: 2, mbits: 3, bias: 1, special: 'none'},
  fp6_e3m2: {ebits: 3, mbits: 2, bias: 3, special: 'none'},
  fp4_e2m1: {ebits: 2, mbits: 1, bias: 1, special: 'none'},
};

// The names core/numerics/dtype.c accepts, and PyTorch's.
const ALIASES = {
  e4m3fn: 'fp8_e4m3', fp8_e4m3fn: 'fp8_e4m3', e4m3: 'fp8_e4m3', float8_e4m3fn: 'fp8_e4m3',
  e5m2: 'fp8_e5m2', float8_e5m2: 'fp8_e5m2', e2m3: 'fp6_e2m3', e3m2: 'fp6_e3m2', e2m1: 'fp4_e2m1',
  float64: 'fp64', double: 'fp64', float32: 'fp32', float: 'fp32', float16: 'fp16', half: 'fp16',
  bfloat16: 'bf16',
};

const INTS = {int8: 8, int32: 32};

export function canonicalDtype(name) {
  const n = String(name ?? '').toLowerCase().replace(/^torch\./, '');
  const c = ALIASES[n] || n;
  return c === 'fp64' || c === 'e8m0' || BINARY[c] || INTS[c] ? c : null;
}

// Width in bits of a dtype's encoding (tf32: its fp32 container), or null.
export function bitWidth(dtype) {
  const d = canonicalDtype(dtype);
  if (!d) return null;
  if (d === 'fp64') return 64;
  if (d === 'e8m0') return 8;
  if (INTS[d]) return INTS[d];
  const f = BINARY[d];
  return f.container || 1 + f.ebits + f.mbits;
}

// A JSON value as a double: numbers as they are, "nan", "inf", "-inf", "+inf",
// "infinity", decimal strings and C99 hex floats ("0x1.8p+3"). {value, negNaN}
// (negNaN: "-nan", whose sign a JS NaN cannot carry), or null.
export function readValue(v) {
  if (typeof v === 'number') return {value: v, negNaN: false};
  if (typeof v !== 'string') return null;
  const s = v.trim().toLowerCase();
  if (/^[+-]?nan/.test(s)) return {value: NaN, negNaN: s[0] === '-'};
  if (/^[+-]?inf(inity)?$/.test(s)) return {value: s[0] === '-' ? -Infinity : Infinity, negNaN: false};
  const hx = /^([+-]?)0x([0-9a-f]*)(?:\.([0-9a-f]*))?p([+-]?\d+)$/.exec(s);
  if (hx && (hx[2] || hx[3])) {
    const digits = (hx[2] || '') + (hx[3] || '');
    // Exact while the significand fits 53 bits and the result is normal.
    const mant = Number(BigInt('0x' + digits));
    const e = Number(hx[4]) - 4 * (hx[3] || '').length;
    const half = Math.trunc(e / 2); // two steps, so 2^e itself never overflows or underflows
    const x = mant * 2 ** half * 2 ** (e - half);
    return {value: hx[1] === '-' ? -x : x, negNaN: false};
  }
  if (s === '' || Number.isNaN(Number(s))) return null;
  return {value: Number(s), negNaN: false};
}

function doubleBits(x) {
  const dv = new DataView(new ArrayBuffer(8));
  dv.setFloat64(0, x);
  return dv.getBigUint64(0);
}

// m / 2^d rounded to nearest, ties to even (m >= 0, d >= 0).
function shiftRne(m, d) {
  if (d === 0) return m;
  if (d > 60) return 0n; // m < 2^53 is then below half a quantum
  const bd = BigInt(d);
  const q = m >> bd, r = m & ((1n << bd) - 1n), half = 1n << (bd - 1n);
  return r > half || (r === half && (q & 1n)) ? q + 1n : q;
}

function encodeBinary(f, x, negNaN) {
  const u = doubleBits(x);
  const neg = (u >> 63n) === 1n || (Number.isNaN(x) && negNaN);
  const mb = BigInt(f.mbits);
  const sign = neg ? 1n << BigInt(f.ebits + f.mbits) : 0n;
  const expOnes = (1n << BigInt(f.ebits)) - 1n;
  const maxEnc = f.special === 'ieee' ? (expOnes << mb) - 1n
    : f.special === 'fn' ? (expOnes << mb) | ((1n << mb) - 2n) : (expOnes << mb) | ((1n << mb) - 1n);
  const nanFn = maxEnc + 1n; // e4m3fn's S.1111.111
  const inf = () => sign | (f.special === 'none' ? maxEnc : f.special === 'fn' ? nanFn : expOnes << mb);
  const frac52 = u & ((1n << 52n) - 1n);
  const ef = Number((u >> 52n) & 0x7ffn);
  if (ef === 0x7ff && frac52) {
    if (f.special === 'none') return sign;
    if (f.special === 'fn') return sign | nanFn;
    // The quiet bit and what payload fits (IEEE 754-2019 §6.2.3).
    return sign | (expOnes << mb) | (frac52 >> BigInt(52 - f.mbits)) | (1n << (mb - 1n));
  }
  if (ef === 0x7ff) return inf();
  if (ef === 0 && frac52 === 0n) return sign;
  // |x| = m * 2^(e - 52); double subnormals have e = -1022 and no implicit one.
  const e = ef ? ef - 1023 : -1022;
  const m = ef ? frac52 | (1n << 52n) : frac52;
  const emin = 1 - f.bias;
  if (e - emin + 1 > (1 << f.ebits) - 1) return inf();
  const eq = Math.max(e, emin); // the binade whose quantum |x| rounds to
  const n = shiftRne(m, 52 - f.mbits + (eq - e));
  // n counts quanta of 2^(eq - mbits); n >= 2^mbits carries into the exponent field.
  const enc = (BigInt(eq - emin) << mb) + n;
  return enc > maxEnc ? inf() : sign | enc;
}

// e8m0 (OCP MX v1.0 §5.4): unsigned powers of two 2^-127..2^127, 0xff NaN, no zero
// (values below 2^-127 and ±0 give 2^-127), no sign (negatives give NaN).
function encodeE8m0(x) {
  if (Number.isNaN(x) || x < 0 || x === -Infinity) return 0xffn;
  if (x === 0) return 0n;
  if (x === Infinity) return 0xffn;
  const u = doubleBits(x);
  const ef = Number((u >> 52n) & 0x7ffn);
  const e = ef ? ef - 1023 : -1022;
  if (e < -127) return 0n;
  if (e > 127) return 0xffn;
  const m = ef ? (u & ((1n << 52n) - 1n)) | (1n << 52n) : u & ((1n << 52n) - 1n);
  const field = BigInt(e + 127) + (shiftRne(m, 52) === 2n ? 1n : 0n);
  return field <= 0xfen ? field : 0xffn;
}

// Ints: nearest integer (ties to even), saturated to the range; NaN gives 0.
function encodeInt(bits, x) {
  if (Number.isNaN(x)) return 0n;
  const lo = -(2 ** (bits - 1)), hi = 2 ** (bits - 1) - 1;
  let r = Math.round(x);
  if (Math.abs(x - Math.trunc(x)) === 0.5) r = 2 * Math.round(x / 2);
  r = Math.min(hi, Math.max(lo, r));
  return BigInt.asUintN(bits, BigInt(r));
}

// The encoding of value in dtype as a BigInt (tf32: in its fp32 container), or null.
export function encodeBits(value, dtype) {
  const d = canonicalDtype(dtype);
  const v = readValue(value);
  if (!d || !v) return null;
  const x = v.value;
  if (d === 'fp64') {
    const u = doubleBits(x);
    return Number.isNaN(x) && v.negNaN ? u | (1n << 63n) : u;
  }
  if (d === 'e8m0') return encodeE8m0(x);
  if (INTS[d]) return encodeInt(INTS[d], x);
  const f = BINARY[d];
  const enc = encodeBinary(f, x, v.negNaN);
  return f.container ? enc << BigInt(f.container - 1 - f.ebits - f.mbits) : enc;
}

// '0x' and the encoding in hex, zero-padded to the dtype's width; or null.
export function bitsHex(value, dtype) {
  const b = encodeBits(value, dtype);
  if (b === null) return null;
  return '0x' + b.toString(16).padStart(Math.ceil(bitWidth(dtype) / 4), '0');
}

// Sign, exponent and fraction fields in binary, space-separated ('0 01111111 0000000');
// one field (two's complement) for ints; or null.
export function bitFields(value, dtype) {
  const b = encodeBits(value, dtype);
  if (b === null) return null;
  const d = canonicalDtype(dtype);
  const all = b.toString(2).padStart(bitWidth(dtype), '0');
  if (INTS[d] || d === 'e8m0') return all;
  const [eb, mb] = d === 'fp64' ? [11, 52] : [BINARY[d].ebits, BINARY[d].mbits];
  const body = all.slice(0, 1 + eb + mb);
  return `${body[0]} ${body.slice(1, 1 + eb)} ${body.slice(1 + eb)}`;
}
