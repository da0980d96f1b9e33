/** The disk (or the user's quota) is full. Its own module so every engine concern can tell it without importing the engine. */
export function isNoSpace(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT';
}
