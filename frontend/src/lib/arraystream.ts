// Reading a large JSON answer as it arrives: the engine streams a diff as
// one object whose first field is an array written element by element
// (`{"files":[{…},{…}],"session":…}`, engine/server/stream.go). ArrayStream
// finds each element's bytes as they come and parses them in slices of at
// most `slice` bytes, so a 50 MB diff shows its first files at once and
// never holds the main thread for one long parse.

const QUOTE = 0x22,
  BACKSLASH = 0x5c,
  COMMA = 0x2c,
  OPEN_OBJ = 0x7b,
  CLOSE_OBJ = 0x7d,
  OPEN_ARR = 0x5b,
  CLOSE_ARR = 0x5d;

const dec = new TextDecoder();

// ArrayStream takes an answer's bytes (push) and hands back the array's
// elements complete so far (take), then the object's other fields (end).
// An answer not of that shape (the field not first, say) is read whole
// and its elements handed back at the end, in slices all the same.
export class ArrayStream<T> {
  private buf = new Uint8Array(1 << 16);
  private len = 0; // bytes in buf
  private pos = 0; // next byte to scan
  private start = 0; // first byte of the current element (or of the rest)
  private depth = 0; // nesting outside strings, the object's own brace counted
  private inString = false;
  // head: before the array opens; items: inside it; rest: after it;
  // whole: not the shape, read at the end.
  private phase: "head" | "items" | "rest" | "whole" = "head";
  private wholeItems: T[] | null = null;
  private wholeRest: Record<string, unknown> = {};
  private ended = false;

  constructor(
    private field: string,
    private slice = 128 << 10,
  ) {}

  push(chunk: Uint8Array) {
    if (this.ended) throw new Error("ArrayStream: push after end");
    if (this.start > 0 && this.start >= this.len / 2) this.compact();
    if (this.len + chunk.length > this.buf.length) {
      let n = this.buf.length;
      while (n < this.len + chunk.length) n *= 2;
      const b = new Uint8Array(n);
      b.set(this.buf.subarray(0, this.len));
      this.buf = b;
    }
    this.buf.set(chunk, this.len);
    this.len += chunk.length;
  }

  // pending says whether take has bytes left to scan.
  get pending(): boolean {
    if (this.phase === "whole") return (this.wholeItems?.length ?? 0) > 0;
    return this.phase !== "rest" && this.pos < this.len;
  }

  // take scans at most slice bytes and returns the elements they complete.
  take(): T[] {
    if (this.phase === "whole") return this.takeWhole();
    const stop = Math.min(this.len, this.pos + this.slice);
    const b = this.buf;
    let first = -1; // where the slice's first complete element starts
    let last = -1; // where its last one ends
    let i = this.pos;
    for (; i < stop; i++) {
      if (this.inString) {
        // Skip to the string's end: the next quote not escaped (an odd
        // run of backslashes before it), found natively.
        let j = b.indexOf(QUOTE, i);
        for (;;) {
          if (j < 0 || j >= stop) break;
          let k = j - 1;
          while (b[k] === BACKSLASH) k--;
          if ((j - 1 - k) % 2 === 0) break;
          j = b.indexOf(QUOTE, j + 1);
        }
        if (j < 0 || j >= stop) {
          i = stop - 1; // the loop's i++ ends the slice
          continue;
        }
        this.inString = false;
        i = j;
        continue;
      }
      const c = b[i];
      if (this.phase === "head" && this.notShaped(c, i)) {
        this.phase = "whole";
        return [];
      }
      if (c === QUOTE) this.inString = true;
      else if (c === OPEN_OBJ || c === OPEN_ARR) {
        this.depth++;
        if (this.phase === "head" && this.depth === 2) {
          this.phase = "items";
          this.start = i + 1;
        }
      } else if (c === CLOSE_OBJ || c === CLOSE_ARR) {
        this.depth--;
        if (this.phase === "items" && this.depth === 1) {
          // The array closed: its last element ends here (if any).
          if (this.hasValue(this.start, i)) {
            if (first < 0) first = this.start;
            last = i;
          }
          this.phase = "rest";
          this.start = i + 1;
          i++;
          break;
        }
      } else if (c === COMMA && this.phase === "items" && this.depth === 2) {
        if (first < 0) first = this.start;
        last = i;
        this.start = i + 1;
      }
    }
    this.pos = i;
    if (first < 0) return [];
    return JSON.parse("[" + dec.decode(b.subarray(first, last)) + "]") as T[];
  }

  // end returns the object's fields other than the array (which is [] in
  // it), once every byte is pushed and taken. A cut answer throws.
  end(): Record<string, unknown> {
    this.ended = true;
    if (this.phase === "whole") {
      this.parseWhole();
      return this.wholeRest;
    }
    while (this.phase !== "rest" && this.pos < this.len) this.take(); // callers take first; this only scans
    if (this.phase !== "rest") throw new Error(`the answer was cut short: its ${this.field} never ended`);
    const rest = dec.decode(this.buf.subarray(this.start, this.len));
    try {
      return JSON.parse(`{"${this.field}":[]` + rest) as Record<string, unknown>;
    } catch {
      throw new Error("the answer was cut short after its " + this.field);
    }
  }

  // notShaped says whether byte c at i, before the array, shows an answer
  // that is not `{"field":[`.
  private notShaped(c: number, i: number): boolean {
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) return false;
    if (this.depth === 0) return c !== OPEN_OBJ;
    if (c === OPEN_ARR && this.depth === 1) return !this.headIs(i);
    return c !== QUOTE && c !== 0x3a; // only the field's name and its colon come first
  }

  // headIs says whether the bytes before the array at i are `{"field":`.
  private headIs(i: number): boolean {
    const head = dec.decode(this.buf.subarray(0, i)).trim();
    const m = /^\{\s*("(?:[^"\\]|\\.)*")\s*:$/.exec(head);
    if (!m) return false;
    try {
      return JSON.parse(m[1]) === this.field;
    } catch {
      return false;
    }
  }

  private hasValue(from: number, to: number): boolean {
    for (let j = from; j < to; j++) {
      const c = this.buf[j];
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return true;
    }
    return false;
  }

  private compact() {
    this.buf.copyWithin(0, this.start, this.len);
    this.len -= this.start;
    this.pos -= this.start;
    this.start = 0;
  }

  // An answer of another shape: parsed whole once every byte is in, its
  // elements then handed on in slices of about as many bytes.
  private parseWhole() {
    if (this.wholeItems) return;
    let obj: Record<string, unknown>;
    try {
      obj = JSON.parse(dec.decode(this.buf.subarray(0, this.len))) as Record<string, unknown>;
    } catch {
      throw new Error("the answer was cut short (it is not whole JSON)");
    }
    const items = obj?.[this.field];
    this.wholeItems = Array.isArray(items) ? (items as T[]) : [];
    this.wholeRest = { ...obj, [this.field]: [] };
  }

  private takeWhole(): T[] {
    if (!this.ended) return [];
    this.parseWhole();
    const per = Math.max(1, Math.floor((this.wholeItems!.length * this.slice) / Math.max(this.len, 1)));
    return this.wholeItems!.splice(0, per);
  }
}

// nextTask resolves in a later task, so the page paints and handles input
// between two slices.
export function nextTask(): Promise<void> {
  if (typeof MessageChannel === "undefined") return new Promise((r) => setTimeout(r, 0));
  return new Promise((r) => {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => {
      ch.port1.close();
      r();
    };
    ch.port2.postMessage(null);
  });
}

// readArray reads an answer with read (which calls onChunk with each of
// its chunks and resolves at its end), handing on the field's elements in
// slices, one task each, and resolves with the object's other fields.
export async function readArray<T>(
  field: string,
  read: (onChunk: (b: Uint8Array) => void) => Promise<void>,
  onItems: (items: T[]) => void,
  opts: { slice?: number; tick?: () => Promise<void> } = {},
): Promise<Record<string, unknown>> {
  const s = new ArrayStream<T>(field, opts.slice);
  const tick = opts.tick ?? nextTask;
  let done = false;
  let wake: (() => void) | null = null;
  const woke = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  const reading = read((b) => {
    s.push(b);
    woke();
  }).finally(() => {
    done = true;
    woke();
  });
  const pump = async () => {
    for (;;) {
      if (s.pending) {
        const items = s.take();
        if (items.length) onItems(items);
        await tick();
        continue;
      }
      if (done) return;
      await new Promise<void>((r) => (wake = r));
    }
  };
  await Promise.all([reading, pump()]);
  const rest = s.end();
  // An answer of another shape has its elements only now.
  while (s.pending) {
    onItems(s.take());
    await tick();
  }
  return rest;
}
