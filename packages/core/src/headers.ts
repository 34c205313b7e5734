/**
 * Rate-limit response headers: pure functions of (rule results, now, options).
 *
 * - `'draft-10'` (default): draft-ietf-httpapi-ratelimit-headers-10, structured-field
 *   lists with one item per applied rule, in declaration order:
 *   `RateLimit-Policy: "user";q=100;w=60` and `RateLimit: "user";r=42;t=18`.
 * - `'draft-7'`: `RateLimit-Policy: 100;w=60` and `RateLimit: limit=100, remaining=42, reset=18`.
 * - `'draft-6'`: `RateLimit-Policy` plus `RateLimit-Limit`, `-Remaining`, `-Reset`.
 * - `'legacy'`: `X-RateLimit-Limit`, `-Remaining`, `-Reset` (Unix epoch seconds, as GitHub).
 * - `'draft-8'` and `'draft-9'` (express-rate-limit's name) are read as `'draft-10'`: drafts
 *   08 to 10 share the two list fields, their items and parameters (`q`, `w`, `r`, `t`, `pk`).
 *
 * draft-10 items are marked `append`: an adapter appends them to what earlier limiters
 * of the same response wrote, so stacked limiters never overwrite each other. The
 * single-value modes describe the most restrictive rule (lowest remaining) and are
 * computed from every rule the request has met so far, so they are simply set.
 */
import { createHash } from 'node:crypto';
import { configError, describe } from './errors.js';
import { didYouMean } from './suggest.js';
import type { RuleResult } from './types.js';

export type HeaderMode = 'draft-10' | 'draft-7' | 'draft-6' | 'legacy';

/**
 * The draft-10 parameters as written, each with its `;` and `=`, named once here: the
 * working group has discussed renaming them, and a renamed parameter is then a change of
 * this table (or a second table for a new mode, whose items may carry both spellings while
 * clients move over: parsers ignore parameters they do not know). draft-11 keeps these.
 */
const PARAM = { quota: ';q=', window: ';w=', remaining: ';r=', reset: ';t=', partitionKey: ';pk=' } as const;

/** Names of drafts whose fields are those of draft-10 (express-rate-limit writes `'draft-8'`). */
export type HeaderModeAlias = 'draft-8' | 'draft-9';

/**
 * Which headers to send: one mode, several (`['draft-10', 'legacy']`), or `false` for none.
 * `true` means the default, `'draft-10'`.
 * @default 'draft-10'
 */
export type HeadersOption = HeaderMode | HeaderModeAlias | readonly (HeaderMode | HeaderModeAlias)[] | boolean;

export interface HeaderOptions {
  /**
   * Add the draft-10 partition key `pk` to each item: a salted hash of the rule's key,
   * so a client can tell its partitions apart without learning the key. Off by default
   * because even a hash links requests to one another.
   * @default false
   * @example { partitionKey: { salt: process.env.RATELIMIT_PK_SALT } }
   */
  partitionKey?: false | { salt: string };
}

/** One header to write. `append`: join to an existing value with `, ` instead of replacing it. */
export interface HeaderField {
  name: string;
  value: string;
  append: boolean;
}

/** What an adapter knows beside the rule results (all optional). */
export interface HeaderContext {
  /**
   * Every rule result the request has met so far, this limiter's included (single-value
   * modes pick the most restrictive among them). Defaults to the limiter's own rules.
   */
  all?: readonly RuleResult[];
  /** The store key of each of the limiter's rules (only read when `partitionKey` is on). */
  keys?: readonly (string | undefined)[];
  /**
   * For each of the limiter's rules, the exact ms until a request of cost 1 would pass,
   * where known (see `nextAdmission`); used for `t` when `r` is 0.
   */
  next?: readonly (number | undefined)[];
}

/**
 * Renders the headers of one limiter's decision.
 * @param rules the limiter's own rule results (draft-10 items are rendered from these)
 * @param now the decision time in ms (for `legacy` epoch resets)
 */
export type HeaderFormatter = (rules: readonly RuleResult[], now: number, context?: HeaderContext) => HeaderField[];

const MODES: readonly HeaderMode[] = ['draft-10', 'draft-7', 'draft-6', 'legacy'];
const ALIASES: Readonly<Record<HeaderModeAlias, HeaderMode>> = { 'draft-8': 'draft-10', 'draft-9': 'draft-10' };
const NAMES: readonly string[] = [...MODES, ...Object.keys(ALIASES)];
/** Distinct rules whose draft-10 policy item a formatter keeps (rule names come from configuration). */
const POLICY_CACHE_MAX = 1000;

/** A rule's cached draft-10 texts: its policy item and the start of its state item. */
interface RuleItems {
  limit: number;
  windowMs: number;
  policy: string;
  state: string;
}

/** Whole seconds, rounded up. */
function seconds(ms: number): number {
  return ms <= 0 ? 0 : Math.ceil(ms / 1000);
}

/** The policy window `w` in whole seconds, at least 1. */
export function windowSeconds(r: RuleResult): number {
  return Math.max(1, seconds(r.windowMs));
}

/**
 * The draft-10 `t` figure in ms: with units left, the time until the full quota is back;
 * with none left, the time until a request could pass again — `retryAfterMs` on a
 * refusal (so `t` equals `Retry-After`), or `nextMs` (from `nextAdmission`) for an
 * admitted request that took the last unit. Without `nextMs` that case falls back to
 * `resetMs`: exact for fixed windows, an upper bound for the other algorithms.
 */
export function resetMsOf(r: RuleResult, nextMs?: number): number {
  if (r.remaining > 0) return r.resetMs;
  if (!r.allowed && r.retryAfterMs > 0) return r.retryAfterMs;
  return nextMs ?? r.resetMs;
}

/** The rule a single-value header describes: lowest remaining, then the longest wait. */
export function mostRestrictive(rules: readonly RuleResult[]): RuleResult | undefined {
  let best: RuleResult | undefined;
  for (const r of rules) {
    if (best === undefined || r.remaining < best.remaining || (r.remaining === best.remaining && resetMsOf(r) > resetMsOf(best))) best = r;
  }
  return best;
}

function partitionKey(salt: string, rule: string, key: string): string {
  const digest = createHash('sha256').update(salt).update('\0').update(rule).update('\0').update(key).digest();
  return `:${digest.subarray(0, 12).toString('base64')}:`;
}

/** Validates a headers option once; returns the list of modes (empty for `false`). */
export function parseHeaderModes(option: HeadersOption | undefined, path = 'headers'): HeaderMode[] {
  if (option === undefined || option === true) return ['draft-10'];
  if (option === false) return [];
  const list: readonly unknown[] | undefined = typeof option === 'string' ? [option] : Array.isArray(option) ? option : undefined;
  const bad = list === undefined ? option : list.find((m) => typeof m !== 'string' || !NAMES.includes(m));
  if (list === undefined || bad !== undefined || list.length === 0) {
    throw configError('TG_INVALID_HEADERS', {
      path,
      expected: `one of ${MODES.map((m) => `'${m}'`).join(', ')} ('draft-8' and 'draft-9' mean 'draft-10'), an array of them, or false`,
      received: describe(list?.length === 0 ? list : bad),
      fix: `${didYouMean(bad, NAMES)}Use the default 'draft-10', or e.g. ['draft-10', 'legacy'].`,
    });
  }
  const modes = [...new Set(list.map((m) => ALIASES[m as HeaderModeAlias] ?? (m as HeaderMode)))];
  const standard = modes.filter((m) => m !== 'legacy');
  if (standard.length > 1) {
    throw configError('TG_INVALID_HEADERS', {
      path,
      expected: "at most one of 'draft-10', 'draft-7', 'draft-6' (they write the same header names), plus 'legacy' if wanted",
      received: describe(standard.join(' + ')),
      fix: "Pick one draft, e.g. ['draft-10', 'legacy'].",
    });
  }
  return modes;
}

/**
 * Compiles the headers option once. Returns `undefined` when headers are off, so the
 * per-request path can skip all header work with one check.
 * @example
 * const format = compileHeaders(['draft-10', 'legacy']);
 * for (const f of format?.(decision.rules, decision.at) ?? []) ...
 */
export function compileHeaders(option?: HeadersOption, options: HeaderOptions = {}): HeaderFormatter | undefined {
  const modes = parseHeaderModes(option);
  if (modes.length === 0) return undefined;
  const pk = options.partitionKey;
  if (pk !== undefined && pk !== false && (typeof pk !== 'object' || typeof pk.salt !== 'string' || pk.salt.length < 8)) {
    throw configError('TG_INVALID_HEADERS', {
      path: 'partitionKey',
      expected: '{ salt: string } with a secret salt of at least 8 characters, or false',
      received: describe(pk),
      fix: 'Pass a secret salt from your configuration, or leave partitionKey off.',
    });
  }
  const salt = pk ? pk.salt : undefined;
  const draft10 = modes.includes('draft-10');
  const draft7 = modes.includes('draft-7');
  const draft6 = modes.includes('draft-6');
  const legacy = modes.includes('legacy');

  // A rule's draft-10 policy item depends on its name, limit and window only: rendered once
  // and reused, with the start of its state item (`"name";r=`), so that per request only
  // the state item's two figures are formatted. Keyed by name and checked against limit
  // and window, since two stacks may name different rules alike.
  const items = new Map<string, RuleItems>();
  function itemsOf(r: RuleResult): RuleItems {
    const known = items.get(r.name);
    if (known !== undefined && known.limit === r.limit && known.windowMs === r.windowMs) return known;
    const made: RuleItems = {
      limit: r.limit,
      windowMs: r.windowMs,
      policy: `"${r.name}"${PARAM.quota}${r.limit}${PARAM.window}${windowSeconds(r)}`,
      state: `"${r.name}"${PARAM.remaining}`,
    };
    if (items.size < POLICY_CACHE_MAX) items.set(r.name, made);
    return made;
  }

  return function formatHeaders(rules, now, context) {
    const fields: HeaderField[] = [];
    if (draft10 && rules.length === 1 && salt === undefined) {
      // One rule without partition keys (the common case): each value in one expression.
      const r = rules[0] as RuleResult;
      const own = itemsOf(r);
      fields.push({ name: 'RateLimit-Policy', value: own.policy, append: true });
      fields.push({
        name: 'RateLimit',
        value: `${own.state}${Math.max(0, r.remaining)}${PARAM.reset}${seconds(resetMsOf(r, context?.next?.[0]))}`,
        append: true,
      });
    } else if (draft10 && rules.length > 0) {
      let policy = '';
      let state = '';
      for (let i = 0; i < rules.length; i++) {
        const r = rules[i] as RuleResult;
        const own = itemsOf(r);
        const key = salt === undefined ? undefined : context?.keys?.[i];
        const pkParam = key === undefined || salt === undefined ? '' : `${PARAM.partitionKey}${partitionKey(salt, r.name, key)}`;
        const sep = i === 0 ? '' : ', ';
        policy += `${sep}${own.policy}${pkParam}`;
        state += `${sep}${own.state}${Math.max(0, r.remaining)}${PARAM.reset}${seconds(resetMsOf(r, context?.next?.[i]))}${pkParam}`;
      }
      fields.push({ name: 'RateLimit-Policy', value: policy, append: true });
      fields.push({ name: 'RateLimit', value: state, append: true });
    }
    if (draft7 || draft6 || legacy) {
      const top = mostRestrictive(context?.all ?? rules);
      if (top === undefined) return fields;
      const limit = String(top.limit);
      const remaining = String(Math.max(0, top.remaining));
      const own = context?.next === undefined ? -1 : rules.indexOf(top);
      const resetMs = resetMsOf(top, own === -1 ? undefined : context?.next?.[own]);
      const reset = String(seconds(resetMs));
      if (draft7) {
        fields.push({ name: 'RateLimit-Policy', value: `${limit};w=${windowSeconds(top)}`, append: false });
        fields.push({ name: 'RateLimit', value: `limit=${limit}, remaining=${remaining}, reset=${reset}`, append: false });
      }
      if (draft6) {
        fields.push({ name: 'RateLimit-Policy', value: `${limit};w=${windowSeconds(top)}`, append: false });
        fields.push({ name: 'RateLimit-Limit', value: limit, append: false });
        fields.push({ name: 'RateLimit-Remaining', value: remaining, append: false });
        fields.push({ name: 'RateLimit-Reset', value: reset, append: false });
      }
      if (legacy) {
        fields.push({ name: 'X-RateLimit-Limit', value: limit, append: false });
        fields.push({ name: 'X-RateLimit-Remaining', value: remaining, append: false });
        fields.push({ name: 'X-RateLimit-Reset', value: String(Math.ceil((now + resetMs) / 1000)), append: false });
      }
    }
    return fields;
  };
}

/**
 * Joins a new list value to what a header already holds (`a, b`), for appended fields. An
 * earlier item named as one of the new ones (a second limiter on the request with a rule
 * of the same name) is dropped: the draft's policy names tie `RateLimit` items to
 * `RateLimit-Policy` ones, so a name appears once, with the latest limiter's figures.
 */
export function appendHeaderValue(existing: unknown, value: string): string {
  if (existing === undefined || existing === null || existing === '') return value;
  const prior = Array.isArray(existing) ? existing.join(', ') : String(existing);
  if (prior === '') return value;
  if (prior.charCodeAt(0) !== 34 /* " */) return `${prior}, ${value}`;
  const names = new Set(listItems(value).map(itemName));
  const kept = listItems(prior).filter((item) => !names.has(itemName(item)));
  return kept.length === 0 ? value : `${kept.join(', ')}, ${value}`;
}

/** A structured-field list's members, split at the commas outside quoted strings (names hold no `"` or `\`). */
function listItems(list: string): string[] {
  const items: string[] = [];
  let quoted = false;
  let from = 0;
  for (let i = 0; i < list.length; i++) {
    const c = list.charCodeAt(i);
    if (c === 34) quoted = !quoted;
    else if (c === 44 && !quoted) {
      items.push(list.slice(from, i).trim());
      from = i + 1;
    }
  }
  items.push(list.slice(from).trim());
  return items;
}

/** A list member's name: its quoted string, before the parameters. */
function itemName(item: string): string {
  const end = item.indexOf('"', 1);
  return end === -1 ? item : item.slice(0, end + 1);
}

/**
 * Writes fields through an adapter's getter and setter: appended fields are joined to
 * the current value, the others replace it.
 * @example applyHeaders(fields, (n) => res.getHeader(n), (n, v) => res.setHeader(n, v))
 */
export function applyHeaders(
  fields: readonly HeaderField[],
  get: (name: string) => unknown,
  set: (name: string, value: string) => void,
): void {
  for (const f of fields) set(f.name, f.append ? appendHeaderValue(get(f.name), f.value) : f.value);
}
