/**
 * "Did you mean ...?" for configuration errors: the known name closest to what the user
 * wrote, so a message can point to the fix instead of listing every option. One helper
 * for every option check of every package (rules, limiter, stores, controls, adapters,
 * client), so a misspelling is answered the same way everywhere.
 */

/**
 * Edit distance between two names, ignoring case and treating `_` and ` ` as `-`:
 * insertions, deletions, substitutions and swaps of two neighbours each cost 1
 * (optimal string alignment).
 * @example editDistance('algoritm', 'algorithm') // 1
 */
export function editDistance(a: string, b: string): number {
  const x = fold(a);
  const y = fold(b);
  if (x === y) return 0;
  // Three rows of the dynamic-programming table: two back for a swap, one back, this one.
  let prev2: number[] = [];
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const row = [i];
    for (let j = 1; j <= y.length; j++) {
      const same = x[i - 1] === y[j - 1];
      let d = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + (same ? 0 : 1));
      if (i > 1 && j > 1 && x[i - 1] === y[j - 2] && x[i - 2] === y[j - 1]) d = Math.min(d, (prev2[j - 2] as number) + 1);
      row.push(d);
    }
    prev2 = prev;
    prev = row;
  }
  return prev[y.length] as number;
}

function fold(s: string): string {
  return s.toLowerCase().replace(/[_ ]/g, '-');
}

/**
 * The known name closest to `input`, when it is close enough to be a slip of the keys:
 * at most a third of the name's length away (and at least one edit is allowed), the same
 * name in another case, or the start of exactly one name. Ties go to the name listed first.
 * @example closest('windw', ['window', 'limit']) // 'window'
 */
export function closest(input: unknown, known: Iterable<string>): string | undefined {
  if (typeof input !== 'string' || input.length === 0 || input.length > 64) return undefined;
  const names = [...known];
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const name of names) {
    const d = editDistance(input, name);
    if (d < bestDistance && d <= Math.max(1, Math.floor(name.length / 3))) {
      best = name;
      bestDistance = d;
    }
  }
  if (best !== undefined) return best;
  // A name cut short ('first' for 'first-request') is near too, when only one name starts so.
  const starts = input.length >= 3 ? names.filter((name) => fold(name).startsWith(fold(input))) : [];
  return starts.length === 1 ? starts[0] : undefined;
}

/**
 * `"Did you mean 'window'? "` when a known name is close to `input`, else `''`: the
 * start of an error's fix.
 * @example `${didYouMean(k, KNOWN)}Remove the option or check its spelling.`
 */
export function didYouMean(input: unknown, known: Iterable<string>, render: (name: string) => string = quote): string {
  const near = closest(input, known);
  return near === undefined ? '' : `Did you mean ${render(near)}? `;
}

/**
 * The fix of a TG_UNKNOWN_OPTION error: the nearest known option, then `fallback`.
 * @example unknownOptionFix('windowMS', ['window', 'limit'], 'Remove the option.') // "Did you mean 'window'? Remove the option."
 */
export function unknownOptionFix(name: string, known: Iterable<string>, fallback = 'Remove the option or check its spelling.'): string {
  return `${didYouMean(name, known)}${fallback}`;
}

function quote(name: string): string {
  return `'${name}'`;
}
