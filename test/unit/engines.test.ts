/**
 * npm test runs on the Node of the `node` devDependency (npm puts node_modules/.bin first on
 * PATH). Should that binary go missing (e.g. npm skipping its install script), the machine's
 * own Node would run the suite instead: fail loudly rather than test on an unsupported Node.
 */
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
  allowScripts?: Record<string, boolean>;
};

const version = (text: string) => (/(\d+)\.(\d+)/.exec(text) ?? []).slice(1, 3).map(Number) as [number, number];
const atLeast = ([major, minor]: [number, number], [wantMajor, wantMinor]: [number, number]) =>
  major > wantMajor || (major === wantMajor && minor >= wantMinor);

it('runs on a Node that satisfies package.json engines', () => {
  expect(pkg.engines.node).toMatch(/^>=\d+\.\d+$/);
  expect(atLeast(version(process.version), version(pkg.engines.node))).toBe(true);
});

it('runs on the major version of the `node` devDependency, whose install script npm is allowed to run', () => {
  const [major] = version(pkg.devDependencies.node as string);
  expect(version(process.version)[0]).toBe(major);
  expect(pkg.allowScripts?.node).toBe(true);
});
