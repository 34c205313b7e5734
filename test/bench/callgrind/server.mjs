// One hello-world variant for the instruction-count benchmark (run.sh), taken from the
// throughput benchmark's variants (../http/variants.mjs, memory store only):
// `node server.mjs '<variant name>'`; prints "ready <port>" when listening.
import { variants } from '../http/variants.mjs';

const [name] = process.argv.slice(2);
const make = variants[name];
if (!make) {
  console.error(`unknown variant ${name}; known: ${Object.keys(variants).join(', ')}`);
  process.exit(2);
}
const server = await make({});
const { port } = await server.listen();
// Under valgrind everything is ~50x slower: keep idle keep-alive sockets open between batches.
if (server.raw) server.raw.keepAliveTimeout = 600_000;
console.log(`ready ${port}`);
