// A file name shown as it is, never as it displays: the rules of the
// engine's names package (names/quote.go), tested against the same golden
// (names/testdata/quote.json) so the two cannot drift. A session names its
// files: a right-to-left override hides a real extension ("uni\u202egnp.exe"
// displays as "uniexe.png"), a zero-width space makes a second README.md.
// Accented, CJK and emoji names are left as they are.

export type Kind = "control" | "escape" | "bidi" | "invisible" | "invalid_utf8";

const INVALID = -1; // a byte that is not part of valid UTF-8

const isBidi = (r: number) => r === 0x061c || r === 0x200e || r === 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069);

const FORMAT = /^[\p{Cf}]$/u;
const SPACE = /^[\p{Zs}]$/u;

function isInvisible(r: number): boolean {
  if ([0x034f, 0x115f, 0x1160, 0x17b4, 0x17b5, 0x180e, 0x2800, 0x3164, 0xffa0].includes(r)) return true;
  const c = String.fromCodePoint(r);
  return FORMAT.test(c) || (SPACE.test(c) && r !== 0x20) || (r >= 0xe0100 && r <= 0xe01ef) || (r >= 0x180b && r <= 0x180f);
}

const isEmoji = (r: number) =>
  (r >= 0x1f000 && r <= 0x1faff) ||
  (r >= 0x2600 && r <= 0x27bf) ||
  (r >= 0x2300 && r <= 0x23ff) ||
  (r >= 0x2b00 && r <= 0x2bff) ||
  [0xa9, 0xae, 0x203c, 0x2049, 0x2122].includes(r);

// classify says what is deceptive about runes[i] (null: it shows as
// itself); a joiner or variation selector is fine between emoji.
function classify(runes: number[], i: number): Kind | null {
  const r = runes[i];
  if (r === INVALID) return "invalid_utf8";
  if (r === 0x1b || r === 0x9b) return "escape";
  if (r < 0x20 || r === 0x7f || (r >= 0x80 && r <= 0x9f) || r === 0x2028 || r === 0x2029) return "control";
  if (isBidi(r)) return "bidi";
  if (r === 0x200d || (r >= 0xfe00 && r <= 0xfe0f)) {
    const prev = i > 0 ? runes[i - 1] : INVALID;
    const next = i + 1 < runes.length ? runes[i + 1] : INVALID;
    return isEmoji(prev) && (r !== 0x200d || isEmoji(next)) ? null : "invisible";
  }
  return isInvisible(r) ? "invisible" : null;
}

const hex = (n: number, w: number) => n.toString(16).padStart(w, "0");

function escape(r: number, byte: number): string {
  if (r === INVALID) return "\\x" + hex(byte, 2);
  if (r === 0x0a) return "\\n";
  if (r === 0x09) return "\\t";
  if (r === 0x0d) return "\\r";
  if (r < 0x80) return "\\x" + hex(r, 2);
  if (r > 0xffff) return "\\U" + hex(r, 8);
  return "\\u" + hex(r, 4);
}

// A name as code points, with the bytes of invalid UTF-8 kept apart
// (bytes[i] is the byte when runes[i] is INVALID).
interface Decoded {
  runes: number[];
  bytes: number[];
}

function fromString(s: string): Decoded {
  const runes: number[] = [];
  for (const c of s) {
    const r = c.codePointAt(0)!;
    // A lone surrogate cannot come from UTF-8: show it as Go shows U+FFFD.
    runes.push(r >= 0xd800 && r <= 0xdfff ? 0xfffd : r);
  }
  return { runes, bytes: runes.map(() => 0) };
}

// fromBytes decodes UTF-8 as Go does: a byte that does not start a valid
// sequence is one invalid byte.
function fromBytes(b: Uint8Array): Decoded {
  const runes: number[] = [];
  const bytes: number[] = [];
  for (let i = 0; i < b.length;) {
    const b0 = b[i];
    let n = 0;
    let lo = 0x80;
    let hi = 0xbf;
    if (b0 < 0x80) n = 1;
    else if (b0 >= 0xc2 && b0 <= 0xdf) n = 2;
    else if (b0 >= 0xe0 && b0 <= 0xef) {
      n = 3;
      if (b0 === 0xe0) lo = 0xa0;
      if (b0 === 0xed) hi = 0x9f;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      n = 4;
      if (b0 === 0xf0) lo = 0x90;
      if (b0 === 0xf4) hi = 0x8f;
    }
    let ok = n > 0 && i + n <= b.length;
    for (let k = 1; ok && k < n; k++) {
      const c = b[i + k];
      ok = k === 1 ? c >= lo && c <= hi : c >= 0x80 && c <= 0xbf;
    }
    if (!ok) {
      runes.push(INVALID);
      bytes.push(b0);
      i++;
      continue;
    }
    let r = n === 1 ? b0 : b0 & (0xff >> (n + 1));
    for (let k = 1; k < n; k++) r = (r << 6) | (b[i + k] & 0x3f);
    runes.push(r);
    bytes.push(0);
    i += n;
  }
  return { runes, bytes };
}

function quoteDecoded(d: Decoded): string {
  const { runes, bytes } = d;
  const needs =
    runes.length === 0 ||
    runes[0] === 0x20 ||
    runes[0] === 0x22 ||
    runes[runes.length - 1] === 0x20 ||
    runes.some((_, i) => classify(runes, i) !== null);
  if (!needs) return runes.map((r) => String.fromCodePoint(r)).join("");
  let out = '"';
  runes.forEach((r, i) => {
    if (classify(runes, i) !== null) out += escape(r, bytes[i]);
    else if (r === 0x22 || r === 0x5c) out += "\\" + String.fromCodePoint(r);
    else out += String.fromCodePoint(r);
  });
  return out + '"';
}

/** quote is names.Quote: the name unchanged when it shows as what it is,
 * else double-quoted with its deceptive characters escaped. */
export function quote(name: string): string {
  return quoteDecoded(fromString(name));
}

/** quoteBytes is quote of a name given as its bytes (a path that is not
 * valid UTF-8 comes as raw_path: its invalid bytes show as \xff). */
export function quoteBytes(name: Uint8Array): string {
  return quoteDecoded(fromBytes(name));
}

/** kinds lists what is deceptive in name, one entry per character. */
export function kinds(name: string | Uint8Array): Kind[] {
  const { runes } = typeof name === "string" ? fromString(name) : fromBytes(name);
  return runes.map((_, i) => classify(runes, i)).filter((k): k is Kind => k !== null);
}

/** A path as the API gives it: raw_path (base64 of its bytes) when the
 * path is not valid UTF-8. */
export interface Named {
  path: string;
  raw_path?: string;
}

/** shown is how to show a path: the text, and whether it needed quoting
 * (a marker then says the name holds characters that would mislead). */
export function shown(path: string, raw?: string): { text: string; quoted: boolean } {
  let text: string;
  if (raw) {
    const bin = atob(raw);
    text = quoteBytes(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  } else {
    text = quote(path);
  }
  return { text, quoted: text !== path };
}
