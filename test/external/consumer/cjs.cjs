// CommonJS consumer: require() every installed @tollgate package and check its public names.
const packages = require('./packages.json');
const expected = require('./exports.json');
const problems = [];
for (const name of packages) {
  const mod = require(name);
  if (Object.keys(mod).length === 0) problems.push(`${name} exports nothing`);
  for (const n of expected[name] ?? []) if (mod[n] === undefined) problems.push(`${name}.${n} missing`);
}
if (problems.length) {
  console.error(`cjs: ${problems.join(', ')}`);
  process.exit(1);
}
const { createLimiter, constant } = require('@tollgate/core');
createLimiter({ rules: [{ name: 'cjs', key: constant('k'), rate: '1/s' }] })
  .consume({})
  .then((d) => console.log(`cjs ok ${packages.length} ${d.allowed}`));
