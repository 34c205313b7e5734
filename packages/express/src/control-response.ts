/**
 * Writing what the core controls decide onto an Express response: header
 * fields (draft-10 items appended to what earlier limiters wrote) and refusals.
 */
import { applyHeaders, type HeaderField, type Refusal } from '@tollgate/core';
import type { Request, Response } from 'express';

/** Options every control's middleware shares for finding the client address (the default `ip()` key). */
export type { ClientAddressOptions } from '@tollgate/core';

export function writeFields(res: Response, fields: readonly HeaderField[]): void {
  applyHeaders(
    fields,
    (name) => res.getHeader(name),
    (name, value) => res.setHeader(name, value),
  );
}

/** Sends a refusal built by core (status, Retry-After, no-store, problem body). */
export function sendRefusal(res: Response, r: Refusal): void {
  const body = JSON.stringify(r.body);
  res.statusCode = r.status;
  for (const [name, value] of r.headers) res.setHeader(name, value);
  res.setHeader('Content-Type', r.contentType);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

export type { Request, Response };
