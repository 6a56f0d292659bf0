/** Reading Set-Cookie headers as a browser would judge them (RFC 6265bis §4.1.3.2 for __Host-). */

/** Name and attributes (names lower-cased) of one Set-Cookie header. */
export function setCookieAttributes(header: string): { name: string; attrs: Map<string, string> } {
  const [pair = '', ...rest] = header.split(';');
  const attrs = new Map(rest.map((a) => a.trim()).filter(Boolean).map((a) => {
    const i = a.indexOf('=');
    return [(i < 0 ? a : a.slice(0, i)).toLowerCase(), i < 0 ? '' : a.slice(i + 1)] as const;
  }));
  return { name: pair.slice(0, pair.indexOf('=')).trim(), attrs };
}

/** Every cookie set is __Host-, Secure, Path=/, without Domain, HttpOnly; answers their names in order. */
export function expectHostCookies(setCookies: string[]): string[] {
  return setCookies.map((header) => {
    const { name, attrs } = setCookieAttributes(header);
    expect({ name, secure: attrs.has('secure'), path: attrs.get('path'), domain: attrs.has('domain'), httpOnly: attrs.has('httponly') })
      .toEqual({ name: expect.stringMatching(/^__Host-/), secure: true, path: '/', domain: false, httpOnly: true });
    return name;
  });
}
