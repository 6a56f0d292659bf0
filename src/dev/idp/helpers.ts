/**
 * Small helpers shared by the provider configuration, middleware and pages.
 */
import type { Grant } from 'oidc-provider';

export function stringArray(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

export function stringArrayRecord(value: unknown): Record<string, string[]> {
  if (!value || typeof value !== 'object') return {};
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, stringArray(v)]));
}

export function splitScope(value: unknown): string[] {
  return typeof value === 'string' ? [...new Set(value.split(' ').filter(Boolean))] : [];
}

export function increment(record: Record<string, number>, key: string): void {
  record[key] = (record[key] ?? 0) + 1;
}

export function grantHasOfflineAccess(grant: Grant | undefined): boolean {
  return grant ? splitScope(grant.getOIDCScope()).includes('offline_access') : false;
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) {
    const description = (err as { error_description?: unknown }).error_description;
    return typeof description === 'string' ? `${err.message} (${description})` : err.message;
  }
  return String(err);
}
