// TypeScript consumer (CommonJS, node16 resolution).
import core = require('@tollgate/core');

const limiter = core.createLimiter({ rules: [{ name: 'ts', key: core.constant('k'), limit: 5, window: '1m' }] });
void limiter.consume({});
