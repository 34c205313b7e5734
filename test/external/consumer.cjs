// CommonJS consumer: require() every package and check its public names.
const expected = require('./exports.json');
const missing = [];
for (const [name, names] of Object.entries(expected)) {
  const mod = require(name);
  for (const n of names) if (mod[n] === undefined) missing.push(`${name}.${n}`);
}
if (missing.length) {
  console.error(`missing from CJS: ${missing.join(', ')}`);
  process.exit(1);
}
const { createLimiter, constant } = require('@tollgate/core');
createLimiter({ rules: [{ name: 'cjs', key: constant('k'), rate: '1/s' }] })
  .consume({})
  .then((d) => console.log(`cjs ok ${d.allowed}`));
