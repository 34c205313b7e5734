// Starts the tollgate playground: `pnpm start` from the repository root (after `pnpm build`),
// or `node examples/playground/server.mjs`. PORT sets the port (default 4000); it listens on
// 127.0.0.1 only.
import { startPlayground } from './app.mjs';

const port = process.env.PORT === undefined ? 4000 : Number(process.env.PORT);
const { url, close } = await startPlayground({ port });
console.log(`tollgate playground: open ${url}`);
console.log('Ctrl-C to stop.');
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    close().then(() => process.exit(0));
  });
}
