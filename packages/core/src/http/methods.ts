/**
 * What an adapter's limiter offers beside its request handler, written once: the
 * operations by key, `update`, and a request's `reset` and `peek` (`limiterMethods`, for
 * Express' and node's `rateLimit()`), and the same over several limiters together
 * (`groupOperations`, for Fastify's registrations behind one `app.tollgate`).
 */
import { type KeyOperations, keyOperations, type OperationKey, type OperationSource } from '../operations.js';
import type { RuleChanges } from '../rules.js';
import type { Decision } from '../types.js';
import type { RateLimitCore } from './rate-limit.js';

/** The methods a limiter's request handler carries (Express' and node's `rateLimit()`). */
export interface LimiterMethods<Req> extends Omit<KeyOperations, 'reset'> {
  /** Forgets the request's counters for every app-level rule (e.g. after a successful login). */
  reset(req: Req): Promise<void>;
  /**
   * Forgets one key's state for a rule, app-level or route-level (an operation by key, like
   * `get`, `block`, `unblock`, `penalize` and `reward`; docs/operations.md).
   * @example await limiter.reset('login', ipKey('203.0.113.7'))
   */
  reset(rule: string, key: OperationKey): Promise<void>;
  /** Decides the request against the app-level rules without consuming anything. */
  peek(req: Req): Promise<Decision>;
  /**
   * Replaces a rule's `limit`, `burst`, `cost` or `blockFor` in place (the app-level
   * rules, the tiers' and every route's), validated as at construction; the next decisions
   * use it and the rule's state is kept. Per process: apply it on every instance.
   * @example limiter.update('pro', { limit: 10_000 })
   */
  update(ruleName: string, changes: RuleChanges<Req>): void;
}

/** What the methods need of a limiter's pipeline. */
type Member<Req> = Pick<RateLimitCore<Req, unknown, unknown>, 'operationSource' | 'update'>;

/** The methods of one limiter, whose app-level stack is not empty. */
export function limiterMethods<Req>(
  core: Pick<RateLimitCore<Req, unknown, unknown>, 'limiter' | 'operations' | 'update'>,
): LimiterMethods<Req> {
  const ops = core.operations;
  const limiter = core.limiter as NonNullable<typeof core.limiter>;
  // Two arguments: a rule and a key (over the app-level and route-level rules); one: a request.
  const reset = (...args: [Req] | [string, OperationKey]) =>
    args.length >= 2 ? ops.reset(args[0] as string, args[1] as OperationKey) : limiter.reset(args[0] as Req);
  return {
    ...ops,
    reset: reset as LimiterMethods<Req>['reset'],
    peek: (req) => limiter.peek(req),
    update: (ruleName, changes) => core.update(ruleName, changes),
  };
}

/** Operations by key and `update` over every limiter of a group. */
export interface GroupOperations<Req> extends KeyOperations {
  /**
   * Replaces a rule's `limit`, `burst`, `cost` or `blockFor` in place, in every limiter of
   * the group that has a rule of that name (app-level, tier or route rule), validated as at
   * construction; the next decisions use it and the rule's state is kept. Per process:
   * apply it on every instance.
   * @throws TG_UNKNOWN_RULE when no limiter has the rule.
   * @example app.tollgate.update('pro', { limit: 10_000 })
   */
  update(ruleName: string, changes: RuleChanges<Req>): void;
}

/** Where a group's operations object keeps its limiters (shared by every copy of the package). */
const MEMBERS = Symbol.for('tollgate.http.group');

type Group<Req> = { members: Member<Req>[]; sources: OperationSource[] };

/**
 * Joins `member` to the group of `existing` (the operations object this function returned
 * earlier, e.g. an instance's decoration) and returns undefined; or, when `existing` has
 * no group, returns a new group's operations with `member` its first limiter. Rules are
 * looked up in the order the limiters joined.
 * @example const ops = groupOperations(app.tollgate, core); if (ops) app.decorate('tollgate', ops);
 */
export function groupOperations<Req>(existing: unknown, member: Member<Req>): GroupOperations<Req> | undefined {
  const joined = (existing as { [MEMBERS]?: Group<Req> } | undefined)?.[MEMBERS];
  if (joined !== undefined) {
    joined.members.push(member);
    joined.sources.push(member.operationSource);
    return undefined;
  }
  const group: Group<Req> = { members: [member], sources: [member.operationSource] };
  return {
    // keyOperations reads the array at every call: limiters that join later are seen.
    ...keyOperations(group.sources),
    update(ruleName, changes) {
      let unknown: unknown;
      let found = false;
      for (const m of group.members) {
        try {
          m.update(ruleName, changes);
          found = true;
        } catch (err) {
          if ((err as { code?: unknown }).code !== 'TG_UNKNOWN_RULE') throw err;
          unknown ??= err;
        }
      }
      // A group has a limiter from the start, so a rule no limiter has left its error here.
      if (!found) throw unknown;
    },
    [MEMBERS]: group,
  } as GroupOperations<Req>;
}
