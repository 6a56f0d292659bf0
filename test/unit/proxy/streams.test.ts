/**
 * Which proxied answers count as long-lived (held with their session, closed when it ends).
 *
 * Mutation check (by hand, once): src/proxy/streams.ts mayBeEventStream: drop `c === 84` →
 * the upper-case event stream with a Content-Length is missed and the first test fails.
 */
import { isLongLived } from '../../../src/proxy/streams.js';

const head = (statusCode: number, headers: Record<string, string>) => ({ statusCode, headers });

describe('isLongLived', () => {
  it('takes an event stream in any case or spacing, even with a Content-Length', () => {
    expect(isLongLived(head(200, { 'content-type': 'text/event-stream', 'content-length': '10' }), 'GET')).toBe(true);
    expect(isLongLived(head(200, { 'content-type': 'TEXT/Event-Stream; charset=utf-8', 'content-length': '10' }), 'GET')).toBe(true);
    expect(isLongLived(head(200, { 'content-type': ' text/event-stream', 'content-length': '10' }), 'GET')).toBe(true);
    expect(isLongLived(head(200, { 'content-type': 'application/text/event-stream', 'content-length': '10' }), 'GET')).toBe(false);
  });

  it('takes a body of unknown length or of 1 MiB and more, not a short one', () => {
    expect(isLongLived(head(200, { 'content-type': 'application/json' }), 'GET')).toBe(true);
    expect(isLongLived(head(200, { 'content-type': 'application/json', 'content-length': String(1024 * 1024) }), 'GET')).toBe(true);
    expect(isLongLived(head(200, { 'content-type': 'application/json', 'content-length': '54' }), 'GET')).toBe(false);
  });

  it('never takes an answer without a body', () => {
    expect(isLongLived(head(200, {}), 'HEAD')).toBe(false);
    expect(isLongLived(head(204, {}), 'GET')).toBe(false);
    expect(isLongLived(head(304, {}), 'GET')).toBe(false);
    expect(isLongLived(head(101, {}), 'GET')).toBe(false);
  });
});
