// ES module consumer: import every package and check its public names.
import { readFileSync } from 'node:fs';

const expected = JSON.parse(readFileSync(new URL('./exports.json', import.meta.url), 'utf8'));
const missing = [];
for (const [name, names] of Object.entries(expected)) {
  const mod = await import(name);
  for (const n of names) if (mod[n] === undefined) missing.push(`${name}.${n}`);
}
if (missing.length) {
  console.error(`missing from ESM: ${missing.join(', ')}`);
  process.exit(1);
}
const { createLimiter, constant } = await import('@tollgate/core');
const d = await createLimiter({ rules: [{ name: 'esm', key: constant('k'), rate: '1/s' }] }).consume({});
console.log(`esm ok ${d.allowed}`);
