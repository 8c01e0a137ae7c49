// CSV as RFC 4180 has it: records end in CRLF, a field holding a comma, a double
// quote, CR or LF is quoted and its quotes doubled; the first record is the header.
// And a download of text made in the page (a Blob behind a temporary link with the
// download attribute), so no server route is needed.

// One field: null/undefined empty, numbers in full precision (JavaScript's shortest
// round-trip form, so 0.1 stays 0.1 and 2.233780888840556 every digit), objects as
// JSON.
export function csvField(v) {
  let s;
  if (v === null || v === undefined) s = '';
  else if (typeof v === 'number') s = Number.isNaN(v) ? 'NaN' : !Number.isFinite(v) ? (v > 0 ? 'Inf' : '-Inf') : String(v);
  else if (typeof v === 'object') s = JSON.stringify(v);
  else s = String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

// header: field names; rows: arrays of values (one per header field).
export function toCsv(header, rows) {
  return [header, ...rows].map((r) => r.map(csvField).join(',') + '\r\n').join('');
}

// Saves text as a file named name (through a temporary object URL).
export function downloadText(text, name, type = 'text/csv') {
  const url = URL.createObjectURL(new Blob([text], {type: `${type};charset=utf-8`}));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
