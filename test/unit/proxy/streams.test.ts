/**
 * Which proxied answers count as long-lived (held with their session, closed when it ends).
 *
 * Mutation check (by hand, once): src/proxy/streams.ts mayBeEventStream: drop `c === 84` →
 * the upper-case event stream with a Content-Length is missed and the first test fails.
 */
import { longLivedKind } from '../../../src/proxy/streams.js';

const head = (statusCode: number, headers: Record<string, string>) => ({ statusCode, headers });

describe('longLivedKind', () => {
  it('takes an event stream in any case or spacing, even with a Content-Length', () => {
    expect(longLivedKind(head(200, { 'content-type': 'text/event-stream', 'content-length': '10' }), 'GET')).toBe('event-stream');
    expect(longLivedKind(head(200, { 'content-type': 'TEXT/Event-Stream; charset=utf-8', 'content-length': '10' }), 'GET')).toBe('event-stream');
    expect(longLivedKind(head(200, { 'content-type': ' text/event-stream', 'content-length': '10' }), 'GET')).toBe('event-stream');
    expect(longLivedKind(head(200, { 'content-type': 'application/text/event-stream', 'content-length': '10' }), 'GET')).toBeUndefined();
  });

  it('takes a body of unknown length or of 1 MiB and more, not a short one', () => {
    expect(longLivedKind(head(200, { 'content-type': 'application/json' }), 'GET')).toBe('open-ended');
    expect(longLivedKind(head(200, { 'content-type': 'application/json', 'content-length': String(1024 * 1024) }), 'GET')).toBe('open-ended');
    expect(longLivedKind(head(200, { 'content-type': 'application/json', 'content-length': '54' }), 'GET')).toBeUndefined();
  });

  it('never takes an answer without a body', () => {
    expect(longLivedKind(head(200, {}), 'HEAD')).toBeUndefined();
    expect(longLivedKind(head(204, {}), 'GET')).toBeUndefined();
    expect(longLivedKind(head(304, {}), 'GET')).toBeUndefined();
    expect(longLivedKind(head(101, {}), 'GET')).toBeUndefined();
  });
});
