/**
 * A parser for HTTP Structured Field Values (RFC 9651, which obsoletes RFC 8941):
 * Lists and Dictionaries, with every bare item type. The `RateLimit` and
 * `RateLimit-Policy` fields of draft-ietf-httpapi-ratelimit-headers are Lists (draft 8
 * onwards) or a Dictionary / Item (draft 7).
 *
 * Parsing follows the RFC's algorithms: any error fails the whole field (the caller
 * then ignores it). Nothing here throws to the caller; `parseList` and
 * `parseDictionary` return `undefined` on malformed input.
 */

/** A token, as distinct from a string. */
export interface Token {
  readonly token: string;
}

export type BareItem = number | string | boolean | Token | Uint8Array | Date;
export type Params = Map<string, BareItem>;
export interface Item {
  value: BareItem;
  params: Params;
}
export interface InnerList {
  value: Item[];
  params: Params;
}
export type Member = Item | InnerList;

class Fail extends Error {}

/** Input longer than this is not parsed (a guard against hostile headers). */
const MAX_LENGTH = 8192;

class Parser {
  i = 0;
  constructor(readonly s: string) {}

  fail(): never {
    throw new Fail();
  }
  peek(): string {
    return this.s[this.i] ?? '';
  }
  eof(): boolean {
    return this.i >= this.s.length;
  }
  skipSP(): void {
    while (this.s[this.i] === ' ') this.i++;
  }
  skipOWS(): void {
    while (this.s[this.i] === ' ' || this.s[this.i] === '\t') this.i++;
  }

  key(): string {
    const start = this.i;
    const c = this.peek();
    if (!/[a-z*]/.test(c)) this.fail();
    this.i++;
    while (/[a-z0-9_\-.*]/.test(this.peek()) && !this.eof()) this.i++;
    return this.s.slice(start, this.i);
  }

  params(): Params {
    const p: Params = new Map();
    while (this.peek() === ';') {
      this.i++;
      this.skipSP();
      const k = this.key();
      let v: BareItem = true;
      if (this.peek() === '=') {
        this.i++;
        v = this.bareItem();
      }
      p.set(k, v);
    }
    return p;
  }

  item(): Item {
    const value = this.bareItem();
    return { value, params: this.params() };
  }

  member(): Member {
    if (this.peek() !== '(') return this.item();
    this.i++;
    const items: Item[] = [];
    for (;;) {
      this.skipSP();
      if (this.peek() === ')') {
        this.i++;
        return { value: items, params: this.params() };
      }
      items.push(this.item());
      const c = this.peek();
      if (c !== ' ' && c !== ')') this.fail();
    }
  }

  bareItem(): BareItem {
    const c = this.peek();
    if (c === '-' || (c >= '0' && c <= '9')) return this.number();
    if (c === '"') return this.string();
    if (c === '*' || /[A-Za-z]/.test(c)) return this.token();
    if (c === ':') return this.bytes();
    if (c === '?') return this.boolean();
    if (c === '@') {
      this.i++;
      const n = this.number();
      if (!Number.isInteger(n)) this.fail();
      return new Date(n * 1000);
    }
    if (c === '%') return this.displayString();
    return this.fail();
  }

  number(): number {
    const start = this.i;
    if (this.peek() === '-') this.i++;
    const digits = this.i;
    let dot = false;
    for (;;) {
      const c = this.peek();
      if (c >= '0' && c <= '9') this.i++;
      else if (c === '.' && !dot) {
        dot = true;
        this.i++;
      } else break;
    }
    const body = this.s.slice(digits, this.i);
    // Integers have at most 15 digits; decimals at most 12 before the point and 1 to 3 after.
    if (!(dot ? /^\d{1,12}\.\d{1,3}$/ : /^\d{1,15}$/).test(body)) this.fail();
    return Number(this.s.slice(start, this.i));
  }

  string(): string {
    this.i++;
    let out = '';
    for (;;) {
      if (this.eof()) this.fail();
      const c = this.s[this.i++] as string;
      if (c === '\\') {
        const n = this.s[this.i++];
        if (n !== '"' && n !== '\\') this.fail();
        out += n;
      } else if (c === '"') return out;
      else if (c < ' ' || c > '~') this.fail();
      else out += c;
    }
  }

  token(): Token {
    const start = this.i++;
    while (/[!#$%&'*+\-.^_`|~0-9A-Za-z:/]/.test(this.peek()) && !this.eof()) this.i++;
    return { token: this.s.slice(start, this.i) };
  }

  bytes(): Uint8Array {
    const end = this.s.indexOf(':', this.i + 1);
    if (end < 0) this.fail();
    const b64 = this.s.slice(this.i + 1, end);
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64)) this.fail();
    this.i = end + 1;
    return Uint8Array.from(Buffer.from(b64, 'base64'));
  }

  boolean(): boolean {
    const v = this.s[this.i + 1];
    if (v !== '0' && v !== '1') this.fail();
    this.i += 2;
    return v === '1';
  }

  displayString(): string {
    if (this.s[this.i + 1] !== '"') this.fail();
    this.i += 2;
    const bytes: number[] = [];
    for (;;) {
      if (this.eof()) this.fail();
      const c = this.s[this.i++] as string;
      if (c === '"') break;
      if (c < ' ' || c > '~') this.fail();
      if (c === '%') {
        const hex = this.s.slice(this.i, this.i + 2);
        if (!/^[0-9a-f]{2}$/.test(hex)) this.fail();
        bytes.push(Number.parseInt(hex, 16));
        this.i += 2;
      } else bytes.push(c.charCodeAt(0));
    }
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bytes));
    } catch {
      return this.fail();
    }
  }

  /** Between members: OWS, then end of input or a comma followed by more. */
  separator(): boolean {
    this.skipOWS();
    if (this.eof()) return false;
    if (this.peek() !== ',') this.fail();
    this.i++;
    this.skipOWS();
    if (this.eof()) this.fail(); // trailing comma
    return true;
  }
}

function run<T>(value: string | null | undefined, body: (p: Parser) => T): T | undefined {
  if (typeof value !== 'string' || value.length > MAX_LENGTH) return undefined;
  const p = new Parser(value.replace(/^[ \t]+|[ \t]+$/g, ''));
  try {
    return body(p);
  } catch (e) {
    if (e instanceof Fail) return undefined;
    throw e;
  }
}

/**
 * Parses a List field (RFC 9651 4.2.1). An empty field is an empty list.
 * @example parseList('"user";r=42;t=18') // [{ value: 'user', params: Map { r => 42, t => 18 } }]
 */
export function parseList(value: string | null | undefined): Member[] | undefined {
  return run(value, (p) => {
    const out: Member[] = [];
    if (p.eof()) return out;
    do out.push(p.member());
    while (p.separator());
    return out;
  });
}

/**
 * Parses a Dictionary field (RFC 9651 4.2.2). Later duplicates of a key win.
 * @example parseDictionary('limit=100, remaining=42, reset=18')
 */
export function parseDictionary(value: string | null | undefined): Map<string, Member> | undefined {
  return run(value, (p) => {
    const out = new Map<string, Member>();
    if (p.eof()) return out;
    do {
      const k = p.key();
      if (p.peek() === '=') {
        p.i++;
        out.set(k, p.member());
      } else out.set(k, { value: true, params: p.params() });
    } while (p.separator());
    return out;
  });
}

/** Parses a single Item field (RFC 9651 4.2.3). */
export function parseItem(value: string | null | undefined): Item | undefined {
  return run(value, (p) => {
    const item = p.item();
    p.skipSP();
    if (!p.eof()) p.fail();
    return item;
  });
}
