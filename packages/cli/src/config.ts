/**
 * Config files: JSON or YAML holding the same rule objects as the middleware.
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
 * A `throttle` section (core's `slowDown` options; `delay` in ms) puts a
 * throttle in front of the rules. In `policies`, a policy is a list of rules or a
 * mapping `{ rules?, throttle? }`.
 */

import { unknownOptionFix } from '@tollgate/core';
import { parse as parseYaml } from 'yaml';
import { cliError, show } from './errors.js';
import { type Policy, toRules, toThrottle } from './policy.js';

export interface Config {
  policies: Policy[];
  patterns: string[];
  interval: string | undefined;
}

const TOP = ['rules', 'throttle', 'policies', 'patterns', 'interval'];

/** One policy from `rules` and/or `throttle`; at least one of them. */
function policyOf(name: string, rules: unknown, throttle: unknown, path: string): Policy {
  if (rules === undefined && throttle === undefined) {
    throw cliError('TG_CLI_INVALID_CONFIG', {
      path,
      expected: 'rules, a throttle, or both',
      received: 'neither',
      fix: 'Add rules: [{ name: client, rate: 10/s }].',
    });
  }
  return {
    name,
    rules: rules === undefined ? [] : toRules(rules, `${path} rules`),
    throttle: throttle === undefined ? undefined : toThrottle(throttle, `${path} throttle`),
  };
}

/**
 * Parses a config file's text. `name` decides the syntax (`.json` is JSON, anything
 * else YAML, which also reads JSON) and prefixes every error path.
 * @throws CliError TG_CLI_INVALID_CONFIG, TollgateError for a bad rule or throttle
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
        expected: 'rules, throttle, policies, patterns or interval',
        received: show(k),
        fix: unknownOptionFix(k, TOP, 'Remove the section or check its spelling.'),
      });
    }
  }
  const single = doc.rules !== undefined || doc.throttle !== undefined;
  if (single === (doc.policies !== undefined)) {
    throw cliError('TG_CLI_INVALID_CONFIG', {
      path: name,
      expected: 'either rules and/or throttle (one policy) or policies (several), not both',
      received: single ? 'both' : 'neither',
      fix: 'Use rules for simulate, policies to compare named stacks.',
    });
  }
  const policies: Policy[] = [];
  if (single) {
    policies.push(policyOf(name.replace(/^.*[\\/]/, '').replace(/\.[^.]*$/, ''), doc.rules, doc.throttle, name));
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
    for (const [policy, body] of Object.entries(p)) {
      const path = `${name} policies.${policy}`;
      if (Array.isArray(body)) {
        policies.push(policyOf(policy, body, undefined, path));
        continue;
      }
      const { rules, throttle, ...rest } = (typeof body === 'object' && body !== null ? body : { rules: body }) as Record<string, unknown>;
      const extra = Object.keys(rest)[0];
      if (extra !== undefined) {
        throw cliError('TG_CLI_INVALID_CONFIG', {
          path: `${path}.${extra}`,
          expected: 'a list of rules, or { rules, throttle }',
          received: show(extra),
          fix: unknownOptionFix(extra, ['rules', 'throttle'], 'Remove the key or check its spelling.'),
        });
      }
      policies.push(policyOf(policy, rules, throttle, path));
    }
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
