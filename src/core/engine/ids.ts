import { randomBytes } from 'node:crypto';

/**
 * Ids that sort by creation time and are short enough to type in a CLI:
 * a prefix, 9 base-36 digits of milliseconds, 6 random base-36 characters.
 */
export function newId(prefix: 't' | 'c' | 'r' | 's' | 'a'): string {
  const time = Date.now().toString(36).padStart(9, '0');
  const rand = Array.from(randomBytes(6), (b) => (b % 36).toString(36)).join('');
  return `${prefix}_${time}${rand}`;
}
