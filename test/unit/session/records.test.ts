import { deserializeRecord, serializeRecord } from '../../../src/session/records.js';

describe('session record format', () => {
  it('puts the token version and sealed set first, and round-trips', () => {
    const text = serializeRecord({ tokens: { v: 3, sealed: 'v1.kid.iv.ct' }, auth: undefined, cookie: { path: '/' }, list: [] });
    expect(text.startsWith('{"tv":3,"tok":"v1.kid.iv.ct",')).toBe(true);
    expect(JSON.parse(text)).toMatchObject({ tv: 3, tok: 'v1.kid.iv.ct', list: [] });
    expect(deserializeRecord(text)).toEqual({ tokens: { v: 3, sealed: 'v1.kid.iv.ct' }, cookie: { path: '/' }, list: [] });
  });

  it('serializes a record with nothing but tokens as valid JSON, and reads it back', () => {
    const text = serializeRecord({ tokens: { v: 0, sealed: '' } });
    expect(JSON.parse(text)).toEqual({ tv: 0, tok: '' });
    expect(deserializeRecord(text)).toEqual({ tokens: { v: 0, sealed: '' } });
  });

  it('refuses sealed values that could break out of the JSON string', () => {
    expect(() => serializeRecord({ tokens: { v: 1, sealed: 'a","x":"y' } })).toThrow();
  });

  it('reads anything else as no session', () => {
    for (const junk of ['', '{}', '{"tok":"x","tv":1}', 'not json', '{"tv":1,"tok":"x"', '{"tv":1,"tok":"x"]', '{"tv":1,"tok":"x",}', '{"tv":1,"tok":"x","a":[}']) {
      expect(deserializeRecord(junk)).toBeUndefined();
    }
  });
});
