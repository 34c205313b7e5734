/**
 * @tollgate/cli — the `tollgate` command and the simulator behind it.
 *
 * The command is `run(argv, io)`; the pieces are exported for programs that want a
 * prediction without the command line (the playground's `/api/simulate` uses them).
 *
 * @module @tollgate/cli
 */
export { HELP } from './args.js';
export { type Arrival, generateArrivals, MAX_ARRIVALS, type Pattern, type PatternTarget, parsePattern } from './arrivals.js';
export { type ByteRateRun, type ByteRateRunOptions, byteRateSvg, byteRateTable, simulateByteRate, throughput } from './byte-rate.js';
export { defaultIo, type Io, run } from './cli.js';
export { type Config, parseConfig } from './config.js';
export { CLI_ERROR_CODES, CliError, type CliErrorCode } from './errors.js';
export {
  ALGORITHM_CHOICES,
  type AlgorithmChoice,
  describePolicy,
  type PlainRule,
  type Policy,
  policyFromFlags,
  type RuleFlags,
  toRules,
} from './policy.js';
export { createProgress, type Progress, type ProgressOptions } from './progress.js';
export { seededRandom } from './random.js';
export { firstWindow, type SimulateOptions, type SimulationResult, simulate } from './simulate.js';
export { type Busiest, busiest, type RequestRecord, type Summary, summarize, type Verdict } from './stats.js';
export { COLORS, MAX_ROWS, type Panel, panelOf, timelineSvg } from './svg.js';
export { compareTable, requestTable, summaryLines, table } from './table.js';
export { parseTime } from './time.js';
export { parseTrace } from './trace.js';
