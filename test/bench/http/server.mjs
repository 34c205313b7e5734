// One benchmark server per process: `node server.mjs <variant> <redisPort>`.
// Reports { port } over IPC when listening and answers { cpu } requests with the
// process's own CPU time (user + system, µs), so the harness can charge each server
// only for its own work (on two cores the load generator competes with it).
import { variants } from './variants.mjs';

const [name, redisPort] = process.argv.slice(2);
const make = variants[name];
if (!make) {
  console.error(`unknown variant ${name}; known: ${Object.keys(variants).join(', ')}`);
  process.exit(2);
}
const server = await make({ redisPort: Number(redisPort) || undefined });
const { port } = await server.listen();
process.on('message', async (m) => {
  if (m === 'cpu') {
    const u = process.cpuUsage();
    // t: the monotonic clock in µs, the timebase of a --cpu-prof profile (for profile.mjs).
    process.send({ cpu: u.user + u.system, t: Number(process.hrtime.bigint() / 1000n) });
  } else if (m === 'stop') {
    await server.close();
    process.exit(0);
  }
});
process.send({ port });
