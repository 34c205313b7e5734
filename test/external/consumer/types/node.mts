import { createServer } from 'node:http';
import { rateLimit } from '@tollgate/node';

const limit = rateLimit({ rules: [{ name: 'ip', rate: '300/min' }] });
export const server = createServer(async (req, res) => {
  if (!(await limit(req, res))) return;
  res.end('ok');
});
