import { routeSchema } from '../../../src/config/schema.js';
import { routeMatcher } from '../../support/routes.js';

const route = (path: string, extra: Record<string, unknown> = {}) => routeSchema.parse({ path, target: 'http://up.internal', ...extra });

describe('route matching', () => {
  const match = routeMatcher([route('/api'), route('/api/orders'), route('/live')]);

  it('matches a route path itself and everything below it on a segment boundary', () => {
    expect(match('/api')?.path).toBe('/api');
    expect(match('/api/x')?.path).toBe('/api');
    expect(match('/apix')).toBeUndefined();
    expect(match('/')).toBeUndefined();
  });

  it('prefers the longest matching path', () => {
    expect(match('/api/orders')?.path).toBe('/api/orders');
    expect(match('/api/orders/42')?.path).toBe('/api/orders');
    expect(match('/api/ordersx')?.path).toBe('/api');
  });

  it('strips the prefix when asked, leaving "/" for the route path itself', () => {
    const m = routeMatcher([route('/api', { stripPrefix: true })]);
    expect(m('/api')?.upstreamPath('/api')).toBe('/');
    expect(m('/api/x/y')?.upstreamPath('/api/x/y')).toBe('/x/y');
    expect(routeMatcher([route('/api')])('/api/x')?.upstreamPath('/api/x')).toBe('/api/x');
  });
});
