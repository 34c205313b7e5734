/**
 * Config files (SPEC 11): JSON or YAML holding the same rule objects as the middleware.
 *
 * ```yaml
 * rules:                      # one policy (a stack) ...
 *   - { name: client, rate: 10/s, algorithm: token-bucket, burst: 5 }
 *   - { name: all, key: global, rate: 50/s }
 * policies:                   # ... or several, for `compare`
 *   strict: [{ name: client, rate: 10/s, algorithm: sliding-log }]
 * patterns: ["burst 40 at 0", "rate 20/s for 3s from 1s"]   # optional
 * interval: 1s                                              # optional
 * ```
 *
 * A throttle (`slowDown`, SPEC 8.1) cannot be simulated yet: core has no throttle
 * control for the simulator to run, and a simulator that guessed would show a
 * prediction production does not make. A `throttle` or `slowDown` section is refused
 * with `TG_CLI_THROTTLE_UNAVAILABLE` until core ships it.
 */
import { parse as parseYaml } from 'yaml';
import { cliError, show } from './errors.js';
import { type Policy, toRules } from './policy.js';

export interface Config {
  policies: Policy[];
  patterns: string[];
  interval: string | undefined;
}

const TOP = ['rules', 'policies', 'patterns', 'interval', 'throttle', 'slowDown'];

/**
 * Parses a config file's text. `name` decides the syntax (`.json` is JSON, anything
 * else YAML, which also reads JSON) and prefixes every error path.
 * @throws CliError TG_CLI_INVALID_CONFIG / TG_CLI_THROTTLE_UNAVAILABLE, TollgateError for a bad rule
 */
export function parseConfig(text: string, name: string): Config {
  let data: unknown;
  try {
    data = name.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw cliError(
      'TG_CLI_INVALID_CONFIG',
      {
        path: name,
        expected: name.endsWith('.json') ? 'valid JSON' : 'valid YAML (or JSON)',
        received: `a syntax error: ${(err as Error).message.split('\n')[0]}`,
        fix: 'Fix the syntax at the place the parser names.',
      },
      err,
    );
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw cliError('TG_CLI_INVALID_CONFIG', {
      path: name,
      expected: 'a mapping with rules (or policies)',
      received: show(data),
      fix: 'Start the file with "rules:" and a list of rules.',
    });
  }
  const doc = data as Record<string, unknown>;
  for (const k of Object.keys(doc)) {
    if (!TOP.includes(k)) {
      throw cliError('TG_CLI_INVALID_CONFIG', {
        path: `${name} ${k}`,
        expected: 'rules, policies, patterns or interval',
        received: show(k),
        fix: 'Remove the section or check its spelling.',
      });
    }
  }
  for (const k of ['throttle', 'slowDown']) {
    if (doc[k] !== undefined) {
      throw cliError('TG_CLI_THROTTLE_UNAVAILABLE', {
        path: `${name} ${k}`,
        expected: 'rate-limit rules (any of the five algorithms, stacks, the leaky queue)',
        received: `a ${k} section`,
        fix: "Throttle simulation arrives together with core's throttle control (SPEC 8.1); simulate the rules without it for now.",
      });
    }
  }
  if ((doc.rules === undefined) === (doc.policies === undefined)) {
    throw cliError('TG_CLI_INVALID_CONFIG', {
      path: name,
      expected: 'either rules (one policy) or policies (several), not both',
      received: doc.rules === undefined ? 'neither' : 'both',
      fix: 'Use rules for simulate, policies to compare named stacks.',
    });
  }
  const policies: Policy[] = [];
  if (doc.rules !== undefined) {
    policies.push({ name: name.replace(/^.*[\\/]/, '').replace(/\.[^.]*$/, ''), rules: toRules(doc.rules, `${name} rules`) });
  } else {
    const p = doc.policies;
    if (typeof p !== 'object' || p === null || Array.isArray(p) || Object.keys(p).length === 0) {
      throw cliError('TG_CLI_INVALID_CONFIG', {
        path: `${name} policies`,
        expected: 'a mapping of policy names to lists of rules',
        received: show(p),
        fix: 'Write policies: { strict: [{ name: client, rate: 10/s }] }.',
      });
    }
    for (const [policy, rules] of Object.entries(p)) policies.push({ name: policy, rules: toRules(rules, `${name} policies.${policy}`) });
  }
  let patterns: string[] = [];
  if (doc.patterns !== undefined) {
    const list = typeof doc.patterns === 'string' ? [doc.patterns] : doc.patterns;
    if (!Array.isArray(list) || !list.every((x) => typeof x === 'string')) {
      throw cliError('TG_CLI_INVALID_CONFIG', {
        path: `${name} patterns`,
        expected: 'a list of pattern strings',
        received: show(doc.patterns),
        fix: 'Write patterns: ["burst 80 at 0"].',
      });
    }
    patterns = list;
  }
  let interval: string | undefined;
  if (doc.interval !== undefined) {
    if (typeof doc.interval !== 'string' && typeof doc.interval !== 'number') {
      throw cliError('TG_CLI_INVALID_CONFIG', {
        path: `${name} interval`,
        expected: 'a length such as "1s" or 1000',
        received: show(doc.interval),
        fix: 'Write interval: 1s.',
      });
    }
    interval = String(doc.interval);
  }
  return { policies, patterns, interval };
}
